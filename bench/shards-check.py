#!/usr/bin/env python3
"""Checks a merged report against what its shards recorded, without oversell's code: the
buyers, order attempts and acknowledged orders added up from each shard's `shard.json`
(`buyers`, `counts.order`), and the order latency histogram added up, bucket by bucket, from
each shard's HdrHistograms (`clients.histograms`, kind `order`, every answer; V2 deflate
decoded here) against the merged report's (`histograms.order`), with the count, mean, p50,
p90, p99, p99.9 and max recomputed from that sum as HdrHistogram 7.6 computes them
(`value_at_quantile`, `mean`, `max`) and compared with `requests.order.latency`.

    python3 bench/shards-check.py RESULTS/report/<run>/report.json RESULTS/shard-0 ... RESULTS/shard-3

Prints one line per figure and `check: PASS` or `check: FAIL` (exit 1). A shard file's
records (`clients.acks` onwards: millions of them) are never parsed: only the head of the
file before them, which holds everything checked here.
"""

import base64
import json
import math
import struct
import sys
import zlib

V2_COOKIE = 0x1C849313
V2_COMPRESSED_COOKIE = 0x1C849314


def decode(b64):
    """A V2 (deflate) histogram: (low, digits, {index: count})."""
    raw = base64.b64decode(b64)
    cookie, length = struct.unpack(">II", raw[:8])
    if cookie == V2_COMPRESSED_COOKIE:
        raw = zlib.decompress(raw[8 : 8 + length])
        cookie, length = struct.unpack(">II", raw[:8])
    if cookie != V2_COOKIE:
        raise ValueError(f"not an HdrHistogram V2 histogram (cookie {cookie:#x})")
    offset, digits, low, _high, ratio = struct.unpack(">IIQQd", raw[8:40])
    if offset != 0 or ratio != 1.0:
        raise ValueError("normalizing offset or conversion ratio not supported")
    payload = raw[40 : 40 + length]
    counts, index, i = {}, 0, 0
    while i < len(payload):
        value, shift = 0, 0
        for n in range(9):
            b = payload[i]
            i += 1
            if n == 8:
                value |= b << 56
                break
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        count = (value >> 1) ^ -(value & 1)
        if count < 0:
            index += -count
        else:
            if count:
                counts[index] = counts.get(index, 0) + count
            index += 1
    return low, digits, counts


class Shape:
    """HdrHistogram's bucket layout for a lowest value and significant digits."""

    def __init__(self, low, digits):
        single = 2 * 10**digits
        self.unit = int(math.floor(math.log2(low)))
        self.half_mag = int(math.ceil(math.log2(single))) - 1
        self.half = 1 << self.half_mag

    def bucket(self, index):
        return max(0, (index >> self.half_mag) - 1)

    def value_for(self, index):
        b = (index >> self.half_mag) - 1
        sub = (index & (self.half - 1)) + self.half
        if b < 0:
            sub -= self.half
            b = 0
        return sub << (b + self.unit)

    def highest(self, index):
        return self.value_for(index) + (1 << (self.unit + self.bucket(index))) - 1

    def median(self, index):
        return self.value_for(index) + ((1 << (self.unit + self.bucket(index))) >> 1)


def rust_round(x):
    f = math.floor(x)
    return f + 1 if x - f >= 0.5 else f


def ms(us):
    return rust_round(us) / 1000.0


def summary(shape, counts):
    """count, mean_ms, p50..p999_ms, max_ms as oversell's LatencySummary::of computes them."""
    total = sum(counts.values())
    order = sorted(counts)
    mean = 0.0
    for i in order:
        mean = mean + float(shape.median(i)) * float(counts[i]) / float(total)
    out = {"count": total, "mean_ms": ms(mean)}
    for name, q in [("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99), ("p999_ms", 0.999)]:
        target = max(1, math.ceil(q * float(total)))
        seen = 0
        for i in order:
            seen += counts[i]
            if seen >= target:
                out[name] = ms(float(shape.highest(i)))
                break
    out["max_ms"] = ms(float(shape.highest(order[-1])))
    return out


def shard_head(folder):
    """A shard file's fields before its records, parsed (the file is pretty-printed JSON whose
    last field is `clients`, whose records start at `acks`)."""
    marker, head = '\n    "acks": ', b""
    with open(f"{folder}/shard.json", "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                raise ValueError(f"{folder}/shard.json: no clients.acks")
            head += chunk
            at = head.find(marker.encode())
            if at >= 0:
                break
    text = head[:at].decode().rstrip().rstrip(",")
    return json.loads(text + "\n  }\n}")


def main():
    report_path, folders = sys.argv[1], sys.argv[2:]
    run = json.load(open(report_path))["runs"][0]
    ok = True

    def check(name, shards, merged):
        nonlocal ok
        good = shards == merged
        ok &= good
        print(f"  {name}: shards {shards}, merged {merged}: {'ok' if good else 'DIFFERENT'}")

    heads = [shard_head(d) for d in folders]
    order_counts = [h["counts"].get("order", {}) for h in heads]
    check("buyers", sum(h["buyers"] for h in heads), run["buyers"])
    check("order attempts", sum(sum(c.values()) for c in order_counts), run["order_attempts"])
    check(
        "acknowledged (order answers created)",
        sum(c.get("created", 0) for c in order_counts),
        run["acknowledged"],
    )
    summed, shape = {}, None
    for h in heads:
        for e in h["clients"]["histograms"]:
            if e["kind"] != "order":
                continue
            low, digits, counts = decode(e["histogram"])
            shape = shape or Shape(low, digits)
            for i, n in counts.items():
                summed[i] = summed.get(i, 0) + n
    low, digits, merged = decode(run["histograms"]["order"])
    same = summed == merged
    ok &= same
    print(
        f"  order latency histogram: {len(summed)} buckets, {sum(summed.values())} answers added "
        f"from the shards; merged {len(merged)} buckets, {sum(merged.values())} answers: "
        f"{'identical' if same else 'DIFFERENT'}"
    )
    mine = summary(shape or Shape(low, digits), summed)
    theirs = run["requests"]["order"]["latency"]
    for k, v in mine.items():
        check(f"order latency {k}", v, theirs[k])
    print(f"check: {'PASS' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


main()
