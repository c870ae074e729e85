#!/usr/bin/env bash
# Seeds each target's corpus from samples/ and runs it for SECONDS (default 300).
# cargo-fuzz needs nightly flags; RUSTC_BOOTSTRAP lets the one stable toolchain take them.
#   fuzz/run.sh hlo_parse 1800
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?target: hlo_parse, analyze, xla_report or oom_message}
seconds=${2:-300}
corpus=corpus/$target
mkdir -p "$corpus"
seed() { for f in "$@"; do cp -f "$f" "$corpus/$(echo "$f" | tr '/' '_')"; done; }
case $target in
  hlo_parse|analyze) seed ../samples/*/dump/*optimizations.txt ../tests/bad_inputs/*.txt ;;
  xla_report) seed ../samples/*/dump/*-buffer-assignment.txt ../samples/*/dump/*-live-range.txt ;;
  oom_message) seed ../samples/oom/*.txt ;;
esac
RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" "$corpus" -- -max_total_time="$seconds" -max_len=200000 -timeout=20
