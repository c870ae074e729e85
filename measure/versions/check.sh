#!/usr/bin/env bash
# The version matrix (issue #44): each jax given, in a virtual environment of
# its own, compiles measure/versions/progs.py's programs on the CPU with XLA's
# dumps on, and hlomem reads each module alone and against XLA's own reports
# (`analyze --verify`, exit 0: every number XLA's buffer assignment wrote
# agrees, the totals among them).
#
#   measure/versions/check.sh HLOMEM_BINARY 0.4.35 0.6.2 ...
set -euo pipefail
HLOMEM="$(realpath "$1")"; shift
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
CASES="gpt_dp gpt_scan resnet18 resnet18_nodonate int8_serve"
failed=0
for version in "$@"; do
  echo "== jax $version"
  python3 -m venv "$WORK/venv-$version"
  if ! "$WORK/venv-$version/bin/pip" install -q "jax[cpu]==$version" >/dev/null 2>&1; then
    echo "warning: could not install jax $version here; skipped"
    continue
  fi
  for case in $CASES; do
    "$WORK/venv-$version/bin/python" "$HERE/progs.py" "$case" "$WORK/$version" >/dev/null 2>&1 \
      || { echo "FAILED: jax $version could not compile $case"; failed=1; continue; }
    for hlo in "$WORK/$version/$case/dump/"*after_optimizations.txt; do
      if out="$("$HLOMEM" analyze --verify "$hlo" 2>&1)"; then
        echo "ok: jax $version $case $(basename "$hlo"): $(grep -o 'all [0-9]* numbers agree' <<<"$out")"
      else
        echo "FAILED: jax $version $case $(basename "$hlo")"
        grep -A8 'verify:' <<<"$out" || tail -5 <<<"$out"
        failed=1
      fi
    done
  done
done
exit $failed
