#!/usr/bin/env bash
# Orders/s and p99 of the database strategies on one hot item (1,000,000 units), with wrk, then
# pgbench's FOR UPDATE ceiling on the same row, same database, same run.
#
#   cargo build --release && bench/hot-row.sh [strategy...]   (default: for-update conditional batched)
#
# Env: PG (server URL without a database, default postgres://postgres:postgres@127.0.0.1:5432),
# DURATION (15s), CONNECTIONS (64), SHOP_FLAGS (extra `serve` flags, e.g. "--work 0s").
set -euo pipefail
cd "$(dirname "$0")/.."
PG=${PG:-postgres://postgres:postgres@127.0.0.1:5432}
DURATION=${DURATION:-15s}
CONNECTIONS=${CONNECTIONS:-64}
BIN=target/release/oversell
PORT=${PORT:-18080}
DB="$PG/oversell_bench_$$"
strategies=("$@")
[ ${#strategies[@]} -eq 0 ] && strategies=(for-update conditional batched)

for s in "${strategies[@]}"; do
  echo "== $s"
  # shellcheck disable=SC2086
  $BIN serve --strategy "$s" --database-url "$DB" --listen "127.0.0.1:$PORT" \
    --ip-rate-limit 0 --rate-limit 0 ${SHOP_FLAGS:-} >"/tmp/oversell-bench-$s.log" 2>&1 &
  shop=$!
  for _ in $(seq 100); do curl -sf "127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
  curl -sf -X PUT "127.0.0.1:$PORT/api/items/1?reset=true" -H 'content-type: application/json' \
    -d '{"stock": 1000000, "name": "hot", "price_cents": 100, "purchase_limit": 1}' >/dev/null
  # The one order script, the request `oversell bench shop` measures too.
  wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency -s bench/order.lua \
    "http://127.0.0.1:$PORT/api/orders" -- "$s-$$" 1
  curl -sf "127.0.0.1:$PORT/api/items/1/audit"; echo
  kill "$shop"; wait "$shop" || true
done

echo "== pgbench FOR UPDATE ceiling (hot row, $CONNECTIONS clients)"
pgbench -n -c "$CONNECTIONS" -j 2 -T "${DURATION%s}" -M prepared -f bench/hot-row.sql "$DB"
psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS oversell_bench_$$ WITH (FORCE)" >/dev/null
