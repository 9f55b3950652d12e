#!/usr/bin/env python3
"""BENCHMARKS.md's summary table, from what `bash benches/run.sh` wrote.

    python3 benches/summary.py [RESULTS_DIR]            # print the table (Markdown)
    python3 benches/summary.py [RESULTS_DIR] --write    # and put it into BENCHMARKS.md

RESULTS_DIR defaults to $BENCH_OUT, else $CARGO_TARGET_DIR/bench-results, else
target/bench-results. It reads machine.txt and the JSON lines of redis.jsonl,
alternate.jsonl, flood.jsonl, lease.jsonl, registry.jsonl, shared_limits.jsonl and icount.jsonl
(a part that did not run is left out of the table). --write replaces what lies between the `<!-- summary:begin -->` and
`<!-- summary:end -->` lines of BENCHMARKS.md: the table is never edited by hand."""
import json
import os
import statistics
import sys
from pathlib import Path

BEGIN, END = "<!-- summary:begin -->", "<!-- summary:end -->"


def rows(path):
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def verdict(value, target, at_most):
    if value is None:
        return "not run"
    met = value <= target if at_most else value >= target
    return "met" if met else "missed"


def table(results):
    machine = (results / "machine.txt").read_text().strip().splitlines() \
        if (results / "machine.txt").exists() else []
    lines = []
    if machine:
        lines.append("Run under: " + "; ".join(m.strip() for m in machine if m.strip()) + ".")
        lines.append("")
    lines.append("| figure | target | measured | |")
    lines.append("| --- | --- | --- | --- |")

    def add(name, target_text, value, target, at_most, detail=""):
        if value is None:
            shown = "—"
        elif value >= 10:
            shown = f"{value:,.1f}"
        else:
            shown = f"{value:.3g}"
        if detail:
            shown += f" ({detail})"
        lines.append(f"| {name} | {target_text} | {shown} | {verdict(value, target, at_most)} |")

    redis = rows(results / "redis.jsonl")
    ratio = {(r.get("concurrency"), r.get("vs")): r["ratio"]
             for r in redis if r.get("name") == "ratio" and "vs" in r}
    add("Redis store, c=1 / `redis-benchmark -c 1`", "≥ 0.95", ratio.get((1, "redis-benchmark -c 1")), 0.95, False)
    piped = [v for (c, vs), v in ratio.items() if c == 50 and "-P" in vs]
    add("Redis store, c=50 / `redis-benchmark -c 50 -P 16`", "≥ 0.9", piped[0] if piped else None, 0.9, False)
    ours_p99 = [r["p99_us"] for r in redis if r.get("name") == "ratelimit" and "shape" not in r
                and r.get("concurrency") == 50]
    their_p99 = [r["p99_us"] for r in redis if r.get("name") == "redis-benchmark"
                 and r.get("script") == "ours" and r.get("concurrency") == 50 and r.get("pipeline") == 1]
    p99 = statistics.median(o / t for o, t in zip(ours_p99, their_p99)) if ours_p99 and their_p99 else None
    add("Redis store, p99 at c=50 / `redis-benchmark -c 50`'s", "≤ 1.2", p99, 1.2, True)
    server = [r for r in redis if r.get("name") == "ratio" and str(r.get("what", "")).startswith("server_us_per_check ours/seeds")]
    add("Redis time per check / the articles' script", "≤ 1.0", server[0]["ratio"] if server else None, 1.0, True)

    alternate = {r["bench"]: r for r in rows(results / "alternate.jsonl")}
    pairs = [
        ("memory_vs_governor/deny/counter/1_threads", "counter, deny, 1 thread / governor", 1.0),
        ("memory_vs_governor/admit/counter/1_threads", "counter, admit, 1 thread / governor", 1.0),
        ("memory_vs_governor/deny/counter/2_threads", "counter, deny, 2 threads / governor", 1.0),
        ("memory_vs_governor/admit/counter/2_threads", "counter, admit, 2 threads / governor", 1.0),
        ("memory_vs_governor/deny/ratelimit/1_threads", "log, deny, 1 thread / governor", 1.3),
        ("memory_vs_governor/admit/ratelimit/1_threads", "log, admit, 1 thread / governor", 1.3),
        ("memory_vs_governor/deny/ratelimit/2_threads", "log, deny, 2 threads / governor", 1.3),
        ("memory_vs_governor/admit/ratelimit/2_threads", "log, admit, 2 threads / governor", 1.3),
        ("macro_overhead/annotated_named", "attribute (`name`) / `Limiter::check` by hand", 1.03),
        ("macro_overhead/annotated", "attribute / `Limiter::check` by hand", 1.03),
    ]
    for bench, name, target in pairs:
        row = alternate.get(bench)
        detail = f"median of {len(row['ratios'])} alternating rounds" if row else ""
        add(f"in process: {name}", f"≤ {target}", row["median"] if row else None, target, True, detail)

    for r in rows(results / "flood.jsonl"):
        if r.get("name") == "ratio":
            add("a flood with the deny cache / `redis-benchmark -c 50 -P 16`", "≥ 10", r["ratio"], 10, False)

    for r in rows(results / "lease.jsonl"):
        if r.get("bench") == "lease":
            algorithm = r["algorithm"].replace("_", " ")
            add(f"leases, {algorithm}: admitted/s / `redis-benchmark -c 50 -P 16`", "≥ 10", r["ratio"], 10, False,
                f"{r['admitted_per_s']:,.0f}/s; {r['redis_us_per_admission']:.2f} µs of Redis per admission")
            add(f"leases, {algorithm}: scripts per admission", "≤ 0.05", r["scripts_per_admission"], 0.05, True)
            add(f"leases, {algorithm}: over-admitted in any window", "0", r["over_admitted"], 0, True,
                f"under-admission {100 * r['under_admission']:.1f} %")
        elif r.get("bench") == "lease_low":
            if r["leased"]:
                windows = r["admitted_per_window"]
                exact = all(w == r["threshold"] for w in windows)
                lines.append(f"| leases, {r['threshold']} per {r['period_s']} s, deny cache "
                             f"{'on' if r['deny_cache'] else 'off'}: admitted per window | exactly "
                             f"{r['threshold']} | {windows} | {'met' if exact else 'missed'} |")
        elif r.get("bench") == "lease_low_ratio":
            cache = "on" if r["deny_cache"] else "off"
            add(f"leases, 100 per minute, deny cache {cache}: p50 / not leased", "≤ 1.1", r["p50_ratio"], 1.1, True)
            add(f"leases, 100 per minute, deny cache {cache}: p99 / not leased", "≤ 1.1", r["p99_ratio"], 1.1, True)
    counts = {r["mode"]: r["per_check"] for r in rows(results / "icount.jsonl")}
    for mode, per_check in counts.items():
        reference = counts.get("governor-" + mode.rsplit("-", 1)[-1])
        versus = f"{per_check / reference:.2f}× governor's" if reference and \
            not mode.startswith("governor") and mode != "attribute" else ""
        lines.append(f"| instructions per in-process check, {mode} (callgrind) | — | "
                     f"{per_check} | {versus} |")
    # The registry's cost (issue 36): a scope without an entry while others have entries, and
    # a key among 10,000 overrides, each against the same check without any entry.
    for mode, base, target in (("attribute-entries", "attribute", 1.03),
                               ("keyed-overrides", "keyed", 1.15)):
        if mode in counts and base in counts:
            add(f"registry: instructions, {mode} / {base}", f"≤ {target}",
                counts[mode] / counts[base], target, True)
    for r in rows(results / "registry.jsonl"):
        if r.get("bench") == "registry":
            add("registry: the Redis check, a key among 10,000 overrides / without", "≤ 1.05",
                r["ratio"], 1.05, True,
                f"median of {r['rounds']} alternating rounds; {r['code_us']:.1f} µs without")
    for r in rows(results / "shared_limits.jsonl"):
        if r.get("bench") == "shared_limits":
            add("shared limits: the Redis check following 10,000 shared overrides / not following",
                "≤ 1.05", r["ratio"], 1.05, True,
                f"median of {r['rounds']} alternating rounds; {r['plain_us']:.1f} µs without")
        elif r.get("bench") == "shared_limits_propagation":
            add("shared limits: a change in force on another instance, median (ms)", "≤ 1000",
                r["p50_ms"], 1000, True,
                f"p90 {r['p90_ms']:.0f} ms, most {r['max_ms']:.0f} ms, of {r['changes']}")
        elif r.get("bench") == "shared_limits_follow":
            lines.append(f"| shared limits: scripts per second one instance runs at rest | — | "
                         f"{r['scripts_per_second_at_rest']:.2f} | "
                         f"{r['scripts_per_change']:.2f} more per change |")
    # Concurrency limits (issue 38): acquire against the rate check, and renewals at rest.
    for r in rows(results / "concurrency.jsonl"):
        if r.get("bench") == "concurrency_latency":
            add("concurrency: acquire latency / a rate check's, c = 1", "≤ 1.2", r["ratio"], 1.2,
                True, f"median of {r['rounds']} alternating rounds; {r['check_us']:.1f} µs a check")
        elif r.get("bench") == "concurrency_throughput":
            add("concurrency: acquire-and-release cycles / rate checks per second, c = 50",
                "≥ 0.45", r["ratio"], 0.45, False,
                f"{r['cycles_per_s']:,.0f} cycles/s against {r['checks_per_s']:,.0f} checks/s; "
                f"{r['denied']} denied")
        elif r.get("bench") == "concurrency_renewals":
            lines.append(f"| concurrency: renewal scripts per second of one process holding "
                         f"{r['held']} slots, at rest | — | {r['scripts_per_s']:.2f} | "
                         f"slot time 30 s |")
    return "\n".join(lines)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    default = os.environ.get("BENCH_OUT") or \
        str(Path(os.environ.get("CARGO_TARGET_DIR", "target")) / "bench-results")
    results = Path(args[0] if args else default)
    text = table(results)
    print(text)
    if "--write" in sys.argv:
        doc = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
        current = doc.read_text()
        if BEGIN not in current or END not in current:
            sys.exit(f"{doc} has no {BEGIN} ... {END} block to replace")
        head, rest = current.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        doc.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")
        print(f"wrote the summary into {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
