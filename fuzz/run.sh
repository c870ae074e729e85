#!/usr/bin/env bash
# Seeds TARGET's corpus and runs it for SECONDS (default 300), on one core.
#   fuzz/run.sh hlo_parse 1800
#   fuzz/run.sh analyze 60 -seed=1        (anything after SECONDS goes to libFuzzer)
# Seeds: the bundled samples, the bad inputs of tests/, and large generated inputs
# (fuzz/seeds.py: deep nesting, wide fan-out). See fuzz/README.md.
# cargo-fuzz needs nightly flags; RUSTC_BOOTSTRAP lets the one stable toolchain take them.
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?target: hlo_parse, analyze, xla_report or oom_message}
seconds=${2:-300}
shift $(($# < 2 ? $# : 2))
corpus=corpus/$target
mkdir -p "$corpus"
seed() { for f in "$@"; do cp -f "$f" "$corpus/$(echo "$f" | tr '/' '_')"; done; }
case $target in
  hlo_parse|analyze)
    seed ../samples/*/dump/*optimizations.txt ../tests/bad_inputs/*.txt
    python3 seeds.py hlo "$corpus"
    max_len=2000000 ;;      # the largest generated module is 1.3 MB
  xla_report)
    seed ../samples/*/dump/*-buffer-assignment.txt ../samples/*/dump/*-live-range.txt
    # The target splits its input at NUL into buffer-assignment, values and live-range:
    # seed each sample's three reports together too.
    for ba in ../samples/*/dump/*-buffer-assignment.txt; do
      stem=${ba%-buffer-assignment.txt}
      [[ -f $stem-buffer-assignment-values.txt && -f $stem-live-range.txt ]] || continue
      { cat "$ba"; printf '\0'; cat "$stem-buffer-assignment-values.txt"; printf '\0'; cat "$stem-live-range.txt"; } \
        > "$corpus/joined_$(basename "$stem").txt"
    done
    python3 seeds.py xla_report "$corpus"
    max_len=1000000 ;;
  oom_message)
    seed ../samples/oom/*.txt
    python3 seeds.py oom_message "$corpus"
    max_len=1000000 ;;
  *) echo "unknown target $target" >&2; exit 2 ;;
esac
# -timeout: one input taking longer is a finding (a hang or a quadratic path), saved as timeout-*.
# -rss_limit_mb: a run holding more memory is a finding too (oom-*).
# The crate has no unsafe code, so no sanitizer by default (several times the executions);
# SANITIZER=address fuzz/run.sh ... turns AddressSanitizer back on.
RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer "${SANITIZER:-none}" "$target" "$corpus" -- \
  -max_total_time="$seconds" -max_len="$max_len" -timeout="${TIMEOUT:-10}" -rss_limit_mb=4096 \
  -print_final_stats=1 "$@"
