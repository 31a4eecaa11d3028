#!/usr/bin/env bash
# A large sharded run with every shard on a host of its own: N Linux network namespaces on one
# bridge (the layout tests/api/shard_hosts.rs checks), `oversell run --shard i/N` in each
# (its own address, its own folder), the reference shop on the bridge's address in the
# machine's namespace, the shard folders copied to one results folder, then one `merge`.
# Prints each shard's peak memory (VmHWM, sampled from /proc every 0.2 s, and /usr/bin/time's
# maximum resident set), the merge's wall time and peak, the merged report's figures, and the
# check that the merged counts and order latency match what the shards recorded
# (bench/shards-check.py: buyers, order attempts, acknowledged, the order latency histograms
# added bucket by bucket, its percentiles). Exit 1 when that check fails.
# Root only (it makes namespaces); no packet leaves the machine.
#
#   cargo build --release && sudo bench/shards-hosts.sh [scenario] [N]
#     (default: bench/gen1m.toml, 4 shards)
#
# Env: PG (server URL without a database, default postgres://postgres:postgres@127.0.0.1:5432),
# STRATEGY (redis-lua), BIN (target/release/oversell), LEAD (seconds to the opening, 20),
# DRAIN (merge's --drain-timeout, 60s), SENDERS (each shard's [client] senders, 4096/N),
# KEEP=1 (leave the shop, its bridge, database and Redis keys up after the merge, to merge
# the results folder again; the script prints how, and how to clean up).
set -euo pipefail
cd "$(dirname "$0")/.."
SCENARIO=${1:-bench/gen1m.toml}
N=${2:-4}
PG=${PG:-postgres://postgres:postgres@127.0.0.1:5432}
STRATEGY=${STRATEGY:-redis-lua}
KEEP=${KEEP:-0}
BIN=$(realpath "${BIN:-target/release/oversell}")
LEAD=${LEAD:-20}
DRAIN=${DRAIN:-60s}
# Every shard's senders together within the shop's --max-connections (4,096 by default): with
# 2,048 each (the default), shards past the second of four waited in the kernel's backlog and
# sent connect errors; with the shop's limit raised to fit them all, its Redis calls timed out
# (8,192 requests in flight) and it answered 500 to nearly every order.
SENDERS=${SENDERS:-$((4096 / N))}
ID=$(printf '%04x%03x' $$ $((RANDOM % 4096)))
NET=10.$((100 + RANDOM % 150)).$((RANDOM % 256))
BRIDGE=ovsb$ID
DB="$PG/oversell_bench_hosts_$$"
PREFIX="oversell-bench-hosts-$$"
WORK=$(mktemp -d /tmp/oversell-shards-hosts.XXXXXX)
RESULTS=$WORK/results
mkdir -p "$RESULTS"

cleanup() {
  for i in $(seq 0 $((N - 1))); do ip netns del "oversell-bench-$ID-$i" 2>/dev/null || true; done
  if [ "$KEEP" = 1 ] && [ -n "${shop:-}" ]; then
    echo "kept: shop pid $shop on $NET.1:18181, bridge $BRIDGE, database $DB, Redis prefix $PREFIX"
    echo "merge again: $BIN merge ${dirs[*]:-$RESULTS/shard-*} --database-url $DB --redis-prefix $PREFIX --out $RESULTS/report"
    echo "clean up: kill $shop; ip link del $BRIDGE; psql $PG/postgres -c 'DROP DATABASE oversell_bench_hosts_$$ WITH (FORCE)'; redis-cli --scan --pattern '*$PREFIX*' | xargs -r redis-cli del"
    return
  fi
  [ -n "${shop:-}" ] && kill "$shop" 2>/dev/null && wait "$shop" 2>/dev/null
  ip link del "$BRIDGE" 2>/dev/null || true
  psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS oversell_bench_hosts_$$ WITH (FORCE)" \
    >/dev/null 2>&1 || true
  redis-cli --scan --pattern "*$PREFIX*" | xargs -r redis-cli del >/dev/null || true
}
trap cleanup EXIT

if grep -q '^\[client\]' "$SCENARIO"; then
  echo "$SCENARIO has a [client] table: the script sets [client] senders itself" >&2; exit 2
fi
if ip -4 route | grep -q "^$NET\."; then echo "$NET.0/24 is in use; run again" >&2; exit 2; fi
ip link add name "$BRIDGE" type bridge
ip addr add "$NET.1/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
for i in $(seq 0 $((N - 1))); do
  ns=oversell-bench-$ID-$i
  ip netns add "$ns"
  ip link add "ovsh$ID$i" type veth peer name "ovsn$ID$i"
  ip link set "ovsh$ID$i" master "$BRIDGE" up
  ip link set "ovsn$ID$i" netns "$ns"
  ip -n "$ns" link set "ovsn$ID$i" name eth0
  ip -n "$ns" addr add "$NET.$((10 + i))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  mkdir -p "$WORK/host-$i"
  cp "$SCENARIO" "$WORK/host-$i/scenario.toml"
  printf '\n[client]\nsenders = %d\n' "$SENDERS" >>"$WORK/host-$i/scenario.toml"
done

"$BIN" serve --strategy "$STRATEGY" --database-url "$DB" --redis-prefix "$PREFIX" \
  --listen "$NET.1:18181" --allow-open-admin --trusted-proxy "$NET.0/24" \
  >"$WORK/shop.log" 2>&1 &
shop=$!
for _ in $(seq 300); do curl -sf "$NET.1:18181/healthz" >/dev/null && break; sleep 0.1; done

# VmHWM of pid $1, sampled until it exits; the last sample (kB) into $2.
sample_hwm() {
  local hwm=0 v
  while [ -e "/proc/$1/status" ]; do
    v=$(awk '/^VmHWM/ {print $2}' "/proc/$1/status" 2>/dev/null || true)
    [ -n "$v" ] && hwm=$v
    sleep 0.2
  done
  echo "$hwm" >"$2"
}

OPEN_AT=$(date -u -d "+$LEAD sec" +%FT%TZ)
pids=()
for i in $(seq 0 $((N - 1))); do
  (
    cd "$WORK/host-$i"
    exec ip netns exec "oversell-bench-$ID-$i" /usr/bin/time -v -o time.txt "$BIN" run \
      --strategy "$STRATEGY" --scenario scenario.toml --shard "$i/$N" --open-at "$OPEN_AT" \
      --shop-url "http://$NET.1:18181" --allow-remote-shop --database-url "$DB" \
      --out out --quiet >run.log 2>&1
  ) &
  pids+=($!)
done
# The shard under each /usr/bin/time.
samplers=()
for i in $(seq 0 $((N - 1))); do
  child=""
  for _ in $(seq 100); do
    child=$(cat "/proc/${pids[$i]}/task/${pids[$i]}/children" 2>/dev/null | awk '{print $1}')
    [ -n "$child" ] && break
    sleep 0.05
  done
  sample_hwm "$child" "$WORK/host-$i/vmhwm" &
  samplers+=($!)
done
failed=0
for i in $(seq 0 $((N - 1))); do wait "${pids[$i]}" || failed=1; done
wait "${samplers[@]}"
[ $failed -eq 0 ] || { tail -n 20 "$WORK"/host-*/run.log; exit 1; }

for i in $(seq 0 $((N - 1))); do
  cp -r "$WORK/host-$i/out" "$RESULTS/shard-$i"
  printf 'shard %d/%d: VmHWM %s kB (sampled), max RSS %s kB (time -v), wall %s\n' "$i" "$N" \
    "$(cat "$WORK/host-$i/vmhwm")" \
    "$(awk -F': ' '/Maximum resident/ {print $2}' "$WORK/host-$i/time.txt")" \
    "$(awk -F': ' '/Elapsed/ {print $2}' "$WORK/host-$i/time.txt")"
done
dirs=()
for i in $(seq 0 $((N - 1))); do dirs+=("$RESULTS/shard-$i"); done
/usr/bin/time -v -o "$WORK/merge-time.txt" "$BIN" merge "${dirs[@]}" --database-url "$DB" \
  --redis-prefix "$PREFIX" --drain-timeout "$DRAIN" --out "$RESULTS/report" --quiet \
  >"$WORK/merge.log" 2>&1 \
  || { cat "$WORK/merge.log"; exit 1; }
printf 'merge: wall %s, max RSS %s kB\n' \
  "$(awk -F': ' '/Elapsed/ {print $2}' "$WORK/merge-time.txt")" \
  "$(awk -F': ' '/Maximum resident/ {print $2}' "$WORK/merge-time.txt")"
report=$(ls -d "$RESULTS"/report/*/ | head -n 1)
jq -c '.runs[0] | {buyers, order_attempts, acknowledged, sold, oversell, lost_acks,
  oracle_s, p99_ms: .requests.order.latency.p99_ms, send_lag_p99: .send_lag.p99_ms,
  generator_bound, drain_ms: .drain.waited_ms}' "$report/report.json"
echo "merged vs shards (bench/shards-check.py):"
checked=0
python3 bench/shards-check.py "$report/report.json" "${dirs[@]}" || checked=1
echo "results: $RESULTS"
trap - EXIT
cleanup
exit $checked
