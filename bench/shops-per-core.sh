#!/bin/bash
# What a thread-per-core redis-lua shop would save: the shop's and Redis's CPU per order, from
# /proc, for one shop process with two tokio workers (MODE=one, `serve`'s default on two cores)
# against two shop processes with one worker each on the same database and Redis prefix, each
# driven by half of wrk's 64 connections (MODE=two: no wake-up ever crosses a thread).
#
#   bench/shops-per-core.sh one|two [postgres://postgres:postgres@127.0.0.1:5432]
#
# 2 s of warm-up, then 8 s measured; prints orders, µs per order of the shop(s) and of Redis,
# and their ratio (the figure `bench shop` calls shop / Redis). Uses the release build, a fresh
# database and key prefix of its own, and removes both at the end.
set -u
MODE=${1:?one or two}
BASE=${2:-postgres://postgres:postgres@127.0.0.1:5432}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/target/release/oversell
TAG=spc_${MODE}_$RANDOM
DB=$BASE/$TAG
COMMON=(--strategy redis-lua --database-url "$DB" --redis-url redis://127.0.0.1:6379
  --redis-prefix "$TAG" --pool-size 64 --work 0s --rate-limit 0 --ip-rate-limit 0)
pids=()
if [ "$MODE" = one ]; then
  "$BIN" serve "${COMMON[@]}" --listen 127.0.0.1:18080 --worker-threads 2 >"/tmp/$TAG-a.log" 2>&1 &
  pids+=($!)
  urls=(http://127.0.0.1:18080)
else
  "$BIN" serve "${COMMON[@]}" --listen 127.0.0.1:18081 --worker-threads 1 >"/tmp/$TAG-a.log" 2>&1 &
  pids+=($!)
  sleep 2 # the first creates the database; the second finds it
  "$BIN" serve "${COMMON[@]}" --listen 127.0.0.1:18082 --worker-threads 1 >"/tmp/$TAG-b.log" 2>&1 &
  pids+=($!)
  urls=(http://127.0.0.1:18081 http://127.0.0.1:18082)
fi
for u in "${urls[@]}"; do
  for _ in $(seq 100); do curl -sf "$u/healthz" >/dev/null && break; sleep 0.2; done
done
curl -sf -X PUT "${urls[0]}/api/items/1?reset=true" -H 'content-type: application/json' \
  -d '{"stock":100000000,"name":"x","price_cents":100,"purchase_limit":1}' >/dev/null
rpid=$(pgrep -x redis-server | head -1)
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
drive() { # seconds tag
  local w=() u
  for u in "${urls[@]}"; do
    wrk -t1 -c$((64 / ${#urls[@]})) -d"$1"s -s "$ROOT/bench/order.lua" "$u/api/orders" -- "$2$RANDOM" \
      >"/tmp/$TAG-wrk-${u##*:}.out" 2>&1 &
    w+=($!)
  done
  wait "${w[@]}"
}
drive 2 w
s0=0; for p in "${pids[@]}"; do s0=$((s0 + $(cpu "$p"))); done; r0=$(cpu "$rpid")
drive 8 m
s1=0; for p in "${pids[@]}"; do s1=$((s1 + $(cpu "$p"))); done; r1=$(cpu "$rpid")
created=$(cat /tmp/"$TAG"-wrk-*.out | awk '/oversell-created:/{n+=$2} END{print n+0}')
python3 -c "
t=$(getconf CLK_TCK); s=($s1-$s0)/t; r=($r1-$r0)/t; n=$created
print('$MODE: orders', n, ' shop µs/order %.1f' % (s/n*1e6), ' Redis µs/order %.1f' % (r/n*1e6),
      ' shop / Redis %.3f' % (s/r)) if n else print('$MODE: no order created; see /tmp/$TAG-*.log')"
kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
rm -f /tmp/"$TAG"-wrk-*.out
psql "$BASE/postgres" -qc "DROP DATABASE IF EXISTS $TAG" >/dev/null
redis-cli --scan --pattern "{$TAG:*" | xargs -r -n 500 redis-cli del >/dev/null
