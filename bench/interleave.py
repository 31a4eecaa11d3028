#!/usr/bin/env python3
"""Medians (min-max) of bench/interleave.sh's JSON files, per label: bench generator's CPU per
request and ratios, or bench shop's CPU per order, shop / Redis and system calls per order."""
import glob, json, os, statistics, sys

out = sys.argv[1]
runs = {}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    label = os.path.basename(path).rsplit("-", 1)[0]
    with open(path) as f:
        runs.setdefault(label, []).append(json.load(f))


def get(doc, dotted):
    for part in dotted.split("."):
        if doc is None:
            return None
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


FIGURES = [
    ("ours µs/req", "ours.cpu.us_per_op"),
    ("goose paced µs/req", "goose_paced.cpu.us_per_op"),
    ("wrk µs/req", "wrk.cpu.us_per_op"),
    ("ours / goose paced", "ours_over_goose_paced"),
    ("ours / wrk", "ours_over_wrk"),
    ("ours send lag p50 ms", "ours.send_lag_p50_ms"),
    ("ours send lag p99 ms", "ours.send_lag_p99_ms"),
    ("ours req/s", "ours.requests_per_s"),
    ("saturation holds /s", "saturation.holds"),
    ("shop orders/s (wrk)", "saturation.orders_per_s"),
    ("shop µs/order", "cpu.saturation.shop.us_per_op"),
    ("Redis µs/order", "cpu.saturation.redis.us_per_op"),
    ("shop / Redis", "cpu.shop_over_redis"),
    ("shop writes/order", "cpu.saturation.shop_syscalls.writes_per_op"),
    ("shop reads/order", "cpu.saturation.shop_syscalls.reads_per_op"),
    ("shop switches/order", "cpu.saturation.shop_syscalls.switches_per_op"),
]

for label, docs in runs.items():
    print(f"{label}: {len(docs)} runs, load at start {[get(d, 'load_average') for d in docs]}")
    for name, key in FIGURES:
        vals = [v for v in (get(d, key) for d in docs) if isinstance(v, (int, float))]
        if vals:
            print(f"  {name:24} median {statistics.median(vals):10.3f}  ({min(vals):.3f}-{max(vals):.3f})  {[round(v, 3) for v in vals]}")
