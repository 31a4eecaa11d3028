#!/usr/bin/env python3
"""Writes a large combined-format access log of a flash sale, for measuring `oversell fit`'s
memory on a log far larger than its buyers (docs/src/rehearsal/last-sale.md, "Memory").

    python3 bench/fit-log.py /tmp/big.log 1000   # about 1000 MB
    /usr/bin/time -v oversell fit /tmp/big.log --out /tmp/fit/fitted.toml

Buyers arrive in a burst (60 % in the first 5 s of 1800 s), 40 % view the product page 1 to 3
times first, 8 % are bots resubmitting 4 times, 10 % of orders succeed and are paid, cancelled
or abandoned 75/10/15; every order line is followed by static asset requests, as a real log's
are. Each buyer's lines are written in its own time order (the log as a whole is not sorted).
"""

import random
import sys
import time

path, megabytes = sys.argv[1], int(sys.argv[2])
target = megabytes * 1_000_000
rng = random.Random(44)
opened = 1796519128.0
agent = '"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0"'


def stamp(t):
    ms = int(round((t - int(t)) * 1000)) % 1000
    return time.strftime("%d/%b/%Y:%H:%M:%S", time.gmtime(int(t))) + f".{ms:03d} +0000"


with open(path, "w") as out:
    written, i = 0, 0
    while written < target:
        i += 1
        t = opened + (rng.random() * 5 if rng.random() < 0.6 else 5 + rng.random() * 1795)
        ip = f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"
        user = f"u-{i}"
        lines = []
        bot = rng.random() < 0.08
        if not bot and rng.random() < 0.4:
            for _ in range(rng.randint(1, 3)):
                lines.append((t, "GET", "/api/items/1", 200))
                t += rng.uniform(0.5, 3.0)
        ok = rng.random() < 0.1
        lines.append((t, "POST", "/api/orders", 201 if ok else 409))
        for _ in range(4 if bot else 0):
            t += rng.uniform(0.2, 0.8)
            lines.append((t, "POST", "/api/orders", 409))
        if ok:
            roll = rng.random()
            t += rng.uniform(2, 10)
            if roll < 0.75:
                lines.append((t, "POST", f"/api/orders/o-{i}/pay", 200))
            elif roll < 0.85:
                lines.append((t, "POST", f"/api/orders/o-{i}/cancel", 200))
        text = []
        for (when, method, p, status) in lines:
            text.append(f'{ip} - {user} [{stamp(when)}] "{method} {p} HTTP/1.1" {status} 57 "-" {agent}\n')
            for asset in ("/static/app.js", "/static/app.css", "/img/item-1.webp"):
                text.append(f'{ip} - {user} [{stamp(when)}] "GET {asset} HTTP/1.1" 200 18234 "https://shop.example/item/1" {agent}\n')
        chunk = "".join(text)
        out.write(chunk)
        written += len(chunk)
    print(f"{path}: {written / 1e6:.0f} MB, {i} buyers", file=sys.stderr)
