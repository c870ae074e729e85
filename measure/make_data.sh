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
# usage: measure/make_data.sh                 everything (96 and 192 layers)
#        measure/make_data.sh twins           only the twins (about 1 minute; .ci/run uses this)
#        measure/make_data.sh big [LAYERS...] only the big modules (default 96 192)
#        measure/make_data.sh folder          only the folder
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
[ $# -gt 0 ] && shift
case "$what" in all|twins|big|folder) ;; *) echo "unknown: $what (all, twins, big, folder)" >&2; exit 2 ;; esac
want() { [ "$what" = all ] || [ "$what" = "$1" ]; }
corpus="${HLOMEM_CORPUS:-../shared}/corpus"
out="$PWD/target/bench-data"
mkdir -p "$out"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp measure/corpus_common.py "$work/"

# compile CASE_DIR PROGRAM CASE OUT_ROOT: runs a corpus program.py for one variant
# (program.py imports corpus_common from the folder it was generated in; ours
# stands in), unless OUT_ROOT/CASE already has its truth.json.
compile() {
    local program="$corpus/cases/$1/program.py" case="$2" root="$3"
    [ -f "$program" ] || { echo "no $program: set HLOMEM_CORPUS to the shared/ folder" >&2; exit 2; }
    if [ -f "$root/$case/truth.json" ]; then
        echo "$case: already made"
        return
    fi
    sed "s|^sys.path.insert(0, .*)|sys.path.insert(0, \"$work\")|" "$program" > "$work/$1.py"
    rm -rf "${root:?}/$case"
    mkdir -p "$root"
    echo "$case: compiling"
    (cd "$work" && CORPUS_OUT_ROOT="$root" python3 "$1.py" "$case" > "$root/$case.log" 2>&1) \
        || { echo "$case failed; see $root/$case.log" >&2; exit 1; }
}

# The non-donated twins of the corpus's donated transformer steps (same program).
if want twins; then
    for case in f3_tf_f32_nodonate f3_tf_f32_L12_nodonate f3_tf_bf16_nodonate f3_tf_f32_remat_nodonate; do
        compile f3_tf_f32_donate "$case" "$out/twins"
    done
fi

if want big; then
    for n in ${@:-96 192}; do
        compile big_transformer_48L_unrolled "big_transformer_${n}L_unrolled" "$out"
    done
fi

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
