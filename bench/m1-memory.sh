#!/bin/bash
# The harness's own peak at 1,000,000 buyers: VmHWM of the `oversell run` process sampled every
# 0.5 s beside /usr/bin/time -v (which reports the largest process it waited for: the shop child
# can be it). Release build. Writes /tmp/m1-LABEL/{hwm.txt,time.txt,report}.
# usage: [SCENARIO=bench/gen2m.toml] bench/m1-memory.sh DATABASE_URL LABEL
set -u
out=/tmp/m1-$2; rm -rf $out; mkdir -p $out
cd "$(dirname "$0")/.."
/usr/bin/time -v -o $out/time.txt target/release/oversell run --strategy redis-lua --scenario "${SCENARIO:-bench/gen1m.toml}" --database-url "$1" --out $out --quiet > $out/stdout.txt 2> $out/stderr.txt &
tp=$!
sleep 0.5
pid=$(pgrep -P $tp -f "oversell run" | head -1)
max=0
while kill -0 $pid 2>/dev/null; do
  h=$(awk '/VmHWM/{print $2}' /proc/$pid/status 2>/dev/null); [ -n "$h" ] && [ "$h" -gt "$max" ] && max=$h
  sleep 0.5
done
wait $tp
echo "harness VmHWM kB: $max" > $out/hwm.txt
echo "load: $(cat /proc/loadavg)" >> $out/hwm.txt
