#!/usr/bin/env bash
# The hot row's physics: what PostgreSQL spends per FOR UPDATE hot-row transaction, and how it
# moves with the number of clients and with synchronous_commit, on a PRIVATE server (its own
# initdb in a temp dir, port 55432, stopped at the end), so pg_stat_wal and the server's CPU are
# the benchmark's alone and no shared server's configuration is touched.
#
#   bench/hot-row-physics.sh                 # clients 1 4 16 64, synchronous_commit on and off
#   CLIENTS="8 64" SECONDS_EACH=5 PERF=1 bench/hot-row-physics.sh
#   CLIENTS="16 64" SYNCS=on HOLD_MS="0 1 3" bench/hot-row-physics.sh   # a slower client under the lock
#
# Per run it prints: tps, the server's CPU per transaction (the postmaster's utime+stime+cutime+
# cstime plus its live children's, from /proc: every backend, reaped or not, and the WAL writer,
# checkpointer, background writer; pgbench's own CPU is `bench shop`'s ceiling figure), and
# pg_stat_wal per transaction (records, bytes, full
# page images, wal_write and wal_sync calls, their time with track_wal_io_timing on).
# From 2 s into each run to 1 s before its end it also samples the live backends' voluntary context
# switches (`/proc/<pid>/status`) and CPU against the hot row's `version`: **wake-ups per
# transaction** and the backends' CPU per transaction, without the clients' connection set-up.
# HOLD_MS (a list, default 0) makes the client wait that long under the lock (a pgbench `\sleep`
# between the lock and the update): a client slower between the lock's grant and its commit.
# SYNCS (default "on off") the synchronous_commit settings to run.
# PERF=1 also samples every process of the server with `perf record -g` for 3 s in the 64-client
# run and prints the top symbols.
set -euo pipefail
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
PORT=${PORT:-55432}
CLIENTS=${CLIENTS:-1 4 16 64}
SECONDS_EACH=${SECONDS_EACH:-8}
DIR=$(mktemp -d /tmp/oversell-physics-XXXXXX)
chown postgres "$DIR"
as_pg() { su postgres -s /bin/bash -c "$*"; }
cleanup() {
  as_pg "$PGBIN/pg_ctl -D $DIR/data -m fast stop" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT

as_pg "$PGBIN/initdb -D $DIR/data -A trust -U postgres" >/dev/null
as_pg "$PGBIN/pg_ctl -D $DIR/data -l $DIR/log -w -o '-p $PORT -k $DIR -c listen_addresses=127.0.0.1 \
  -c max_connections=200 -c track_wal_io_timing=on -c shared_buffers=128MB' start" >/dev/null
URL="postgres://postgres@127.0.0.1:$PORT/postgres"
PM=$(head -1 "$DIR/data/postmaster.pid")
psql -q "$URL" -c "CREATE TABLE items (id bigint PRIMARY KEY, stock bigint NOT NULL, version bigint NOT NULL DEFAULT 0);
                   INSERT INTO items VALUES (2, 1000000000000, 0);"
hot_sql() { # the transaction, with $1 ms of the client's own time under the lock
  echo "BEGIN;"
  echo "SELECT id, stock, version FROM items WHERE id = 2 FOR UPDATE;"
  [ "$1" != 0 ] && echo "\\sleep $1 ms"
  echo "UPDATE items SET stock = stock - 1, version = version + 1 WHERE id = 2;"
  echo "COMMIT;"
}

# CPU seconds of the whole server: the postmaster (own + reaped children) + its live children.
server_cpu() {
  python3 - "$PM" <<'PY'
import os, sys
pm = sys.argv[1]
def stat(pid):
    try:
        t = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    f = t[t.rfind(")") + 2:].split()
    return f[1], int(f[11]) + int(f[12]), int(f[13]) + int(f[14])
_, own, reaped = stat(pm)
live = sum(s[1] for p in os.listdir("/proc") if p.isdigit() and (s := stat(p)) and s[0] == pm)
print((own + reaped + live) / 100.0)
PY
}
# Voluntary context switches and CPU ticks of the server's live processes, and the hot row's version.
live() {
  python3 - "$PM" <<'PY'
import os, sys
pm = sys.argv[1]; cs = ticks = 0
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        t = open(f"/proc/{p}/stat").read()
        f = t[t.rfind(")") + 2:].split()
        if f[1] != pm:
            continue
        ticks += int(f[11]) + int(f[12])
        cs += sum(int(l.split()[1]) for l in open(f"/proc/{p}/status") if l.startswith("voluntary_ctxt_switches"))
    except OSError:
        pass
print(cs, ticks)
PY
  psql -qAtX "$URL" -c "SELECT version FROM items WHERE id = 2"
}
wal() {
  psql -qAtX "$URL" -c "SELECT wal_records, wal_fpi, wal_bytes, wal_write, wal_sync, wal_write_time, wal_sync_time FROM pg_stat_wal"
}

run() { # clients sync hold_ms (ALTER SYSTEM on the private server only)
  local c=$1 sync=$2 hold=$3
  hot_sql "$hold" >"$DIR/hot.sql"
  psql -q "$URL" -c "ALTER SYSTEM SET synchronous_commit = $sync" -c "SELECT pg_reload_conf()" >/dev/null
  psql -q "$URL" -c "SELECT pg_stat_reset_shared('wal')" >/dev/null
  local cpu0 cpu1 out
  cpu0=$(server_cpu)
  if [ "${PERF:-0}" = 1 ] && [ "$c" = 64 ]; then
    ( set +e; sleep 2
      b=$(ps -o pid= --ppid "$PM" | tr -d ' ' | paste -sd,)
      perf record -q -e cpu-clock -F 999 -g -o "$DIR/perf-$sync.data" -p "$b" -- sleep 3 >"$DIR/perf.log" 2>&1
      echo "-- perf of the server's processes (synchronous_commit=$sync, $c clients), top symbols (self):"
      perf report -i "$DIR/perf-$sync.data" --stdio --no-children --sort sym -g none 2>>"$DIR/perf.log" \
        | grep -v '^#' | grep -v '^$' | head -25
      echo "-- by object (kernel vs postgres):"
      perf report -i "$DIR/perf-$sync.data" --stdio --no-children --sort dso -g none 2>>"$DIR/perf.log" \
        | grep -v '^#' | grep -v '^$' | head -6
      cat "$DIR/perf.log" ) &
  fi
  ( sleep 2; live >"$DIR/live0"; sleep $((SECONDS_EACH - 3)); live >"$DIR/live1" ) &
  out=$(pgbench -n -c "$c" -j 2 -T "$SECONDS_EACH" -M prepared -f "$DIR/hot.sql" "$URL" 2>&1)
  wait
  cpu1=$(server_cpu)
  local tps n
  tps=$(grep -oP '^tps = \K[0-9.]+' <<<"$out")
  n=$(grep -oP 'actually processed: \K[0-9]+' <<<"$out")
  IFS='|' read -r rec fpi bytes writes syncs wtime stime <<<"$(wal)"
  python3 - "$c" "$sync" "$tps" "$n" "$cpu0" "$cpu1" "$rec" "$fpi" "$bytes" "$writes" "$syncs" "$wtime" "$stime" "$(cat /proc/loadavg | cut -d' ' -f1-3)" "$hold" "$(cat "$DIR/live0" "$DIR/live1" | tr '\n' ' ')" <<'PY'
import sys
c, sync, tps, n, cpu0, cpu1, rec, fpi, by, wr, sy, wt, st, load, hold, live = sys.argv[1:]
n = int(n); cpu = float(cpu1) - float(cpu0)
cs0, t0, v0, cs1, t1, v1 = map(int, live.split())
k = max(v1 - v0, 1)
print(f"clients {c:>3} sync {sync:<3} hold {hold} ms tps {float(tps):8.0f}  server {cpu*1e6/n:7.1f} us/tx  "
      f"wake-ups {(cs1 - cs0)/k:5.1f} /tx  backends {(t1 - t0)*1e4/k:6.0f} us/tx  "
      f"WAL {int(rec)/n:.2f} rec {int(by)/n:.0f} B {int(fpi)/n:.3f} fpi/tx  "
      f"writes {int(wr)/n:.3f} syncs {int(sy)/n:.3f} /tx  write {float(wt)*1000/n:.1f} us sync {float(st)*1000/n:.1f} us /tx  (load {load})")
PY
}

echo "private PostgreSQL on 127.0.0.1:$PORT ($PGBIN), $SECONDS_EACH s per run"
for sync in ${SYNCS:-on off}; do
  for hold in ${HOLD_MS:-0}; do
    for c in $CLIENTS; do run "$c" "$sync" "$hold"; done
  done
done
