#!/usr/bin/env bash
# Makes the benchmark inputs that are too large to commit, under target/bench-data/:
#   big_transformer_<N>L_unrolled/  the shared corpus's 48-layer transformer program,
#                                   compiled with N layers (default: 96 and 192; the
#                                   192-layer module is about 26 MB of HLO text)
#   folder/                         every after-optimizations module of the shared
#                                   corpus in one folder (the many-modules benchmark)
#   twins/f3_tf_*_nodonate/         the corpus's donated transformer steps compiled
#                                   without donation: the pairs that check HM001's
#                                   predicted saving (`corpus_not_donated_savings...`)
# Needs python3 with jax==0.10.2 (`pip install jax==0.10.2`) and the shared corpus
# (HLOMEM_CORPUS, default ../shared). The 192-layer compile takes about 70 s and 2 GB.
#
# usage: bench/make_data.sh                 everything (96 and 192 layers)
#        bench/make_data.sh twins           only the twins (about 1 minute; .ci/run uses this)
#        bench/make_data.sh big [LAYERS...] only the big modules (default 96 192)
#        bench/make_data.sh folder          only the folder
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
[ $# -gt 0 ] && shift
case "$what" in all|twins|big|folder) ;; *) echo "unknown: $what (all, twins, big, folder)" >&2; exit 2 ;; esac
want() { [ "$what" = all ] || [ "$what" = "$1" ]; }
corpus="${HLOMEM_CORPUS:-../shared}/corpus"
out="$PWD/target/bench-data"
mkdir -p "$out"

program="$corpus/cases/big_transformer_48L_unrolled/program.py"
[ -f "$program" ] || { echo "no $program: set HLOMEM_CORPUS to the shared/ folder" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# program.py imports corpus_common from the folder it was generated in; use ours.
sed "s|^sys.path.insert(0, .*)|sys.path.insert(0, \"$work\")|" "$program" > "$work/program.py"
cp bench/corpus_common.py "$work/"

# The non-donated twins of the corpus's donated transformer steps (same program).
tf_program="$corpus/cases/f3_tf_f32_donate/program.py"
sed "s|^sys.path.insert(0, .*)|sys.path.insert(0, \"$work\")|" "$tf_program" > "$work/tf_program.py"
mkdir -p "$out/twins"
want twins && for case in f3_tf_f32_nodonate f3_tf_f32_L12_nodonate f3_tf_bf16_nodonate f3_tf_f32_remat_nodonate; do
    if [ -f "$out/twins/$case/truth.json" ]; then
        echo "$case: already made"
        continue
    fi
    rm -rf "${out:?}/twins/$case"
    echo "$case: compiling"
    (cd "$work" && CORPUS_OUT_ROOT="$out/twins" python3 tf_program.py "$case" > "$out/twins/$case.log" 2>&1) \
        || { echo "$case failed; see $out/twins/$case.log" >&2; exit 1; }
done

want big && for layers in "${@:-96 192}"; do
    for n in $layers; do
        case="big_transformer_${n}L_unrolled"
        if [ -f "$out/$case/truth.json" ]; then
            echo "$case: already made"
            continue
        fi
        rm -rf "${out:?}/$case"
        echo "$case: compiling (this takes a while)"
        (cd "$work" && CORPUS_OUT_ROOT="$out" python3 program.py "$case" > "$out/$case.log" 2>&1) \
            || { echo "$case failed; see $out/$case.log" >&2; exit 1; }
        ls -l "$out/$case"/dump/*jit_train_step*after_optimizations.txt
    done
done

# The folder benchmark: copies, so that the folder holds nothing else.
if want folder; then
    rm -rf "$out/folder" && mkdir -p "$out/folder"
    n=0
    for f in "$corpus"/cases/*/dump/*after_optimizations.txt; do
        case="$(basename "$(dirname "$(dirname "$f")")")"
        [[ "$case" == big_transformer_* ]] && continue
        cp "$f" "$out/folder/${case}.$(basename "$f")"
        n=$((n + 1))
    done
    echo "folder: $n modules in $out/folder"
fi
