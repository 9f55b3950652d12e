#!/usr/bin/env python3
"""Reads criterion's output (stdin) and prints each `.../ratelimit/...` bench's median time
as a ratio to the matching `.../governor/...` one, and each `macro_overhead/annotated*` as a
ratio to `macro_overhead/by_hand`. JSON lines on stdout; the other lines of the input are
passed through to stderr."""
import json, re, sys

UNITS = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
times, name = {}, None
for line in sys.stdin:
    sys.stderr.write(line)
    stripped = line.strip()
    m = re.match(r"^(\S+)?\s*time:\s*\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", stripped)
    if m:
        if m.group(1):
            name = m.group(1)
        if name:
            times[name] = float(m.group(2)) * UNITS[m.group(3)]
        name = None
    elif stripped.startswith("{"):
        print(stripped)
    elif re.match(r"^[A-Za-z_][\w/]*$", stripped):
        name = stripped
for bench, ns in sorted(times.items()):
    if "/ratelimit/" in bench:
        peer = bench.replace("/ratelimit/", "/governor/")
        if peer in times:
            print(json.dumps({"name": "ratio", "bench": bench, "vs": peer, "ns": round(ns, 2),
                              "peer_ns": round(times[peer], 2),
                              "ratio": round(ns / times[peer], 3), "target": 1.5}))
    if bench.startswith("macro_overhead/annotated") and "macro_overhead/by_hand" in times:
        base = times["macro_overhead/by_hand"]
        print(json.dumps({"name": "ratio", "bench": bench, "vs": "macro_overhead/by_hand",
                          "ns": round(ns, 2), "peer_ns": round(base, 2),
                          "ratio": round(ns / base, 3), "target": 1.03}))
