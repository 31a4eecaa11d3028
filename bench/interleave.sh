#!/usr/bin/env bash
# Two builds measured turn about, so the machine's noise falls on both: runs
# `<bin> bench <what> <args...> --json-file <dir>/<label>-<i>.json` N times for each binary,
# A then B, and prints the medians of the figures that matter (bench/interleave.py).
#
#   bench/interleave.sh A=/tmp/oversell-main B=target/release/oversell 5 generator --rate 5000 --duration 5s
#   bench/interleave.sh A=/tmp/oversell-main B=target/release/oversell 5 shop --strategy redis-lua --duration 10s
#
# Env: OUT (the folder for the JSON files, default a new one under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1#*=}; LA=${1%%=*}
B=${2#*=}; LB=${2%%=*}
N=$3
shift 3
OUT=${OUT:-$(mktemp -d /tmp/oversell-interleave.XXXXXX)}
for i in $(seq 1 "$N"); do
  for pair in "$LA=$A" "$LB=$B"; do
    label=${pair%%=*}; bin=${pair#*=}
    echo "== $label #$i (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    "$bin" bench "$@" --json-file "$OUT/$label-$i.json" >"$OUT/$label-$i.txt" 2>&1 \
      || { echo "$label #$i failed: $OUT/$label-$i.txt" >&2; tail -5 "$OUT/$label-$i.txt" >&2; }
  done
done
python3 bench/interleave.py "$OUT"
