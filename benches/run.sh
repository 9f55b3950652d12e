#!/usr/bin/env bash
# The whole comparison of BENCHMARKS.md, in one run: the machine, the Redis store against
# redis-benchmark (the physical limit) and the seeds' script, the in-process store against
# governor with allocations per check and the attribute's overhead (criterion, then in
# alternating rounds), scaling, the sliding window counter's accuracy against the log, a flood
# with the deny cache, quota leases on one hot key, and instructions per in-process check
# (callgrind, when valgrind is installed); then the summary table.
#
#   bash benches/run.sh                  # everything, a private redis-server per binary
#   BENCH_REDIS_URL=redis://127.0.0.1:6379/ bash benches/run.sh   # against your server
#
# JSON lines go to stdout and to $BENCH_OUT (default $CARGO_TARGET_DIR or target, then
# bench-results/*.jsonl, with machine.txt); progress, criterion's report and the tables go to
# stderr, the summary table last (`python3 benches/summary.py --write` puts it into
# BENCHMARKS.md). Settings: see BENCHMARKS.md (BENCH_*; ROUNDS for the alternating rounds, 7).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${BENCH_OUT:-${CARGO_TARGET_DIR:-target}/bench-results}
mkdir -p "$out"
rm -f "$out"/*.jsonl

{
  echo "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs || echo unknown CPU))"
  echo "$(redis-server --version | cut -d' ' -f1-3 || echo 'no redis-server')"
  rustc --version
  echo "$(date -u +%Y-%m-%d), load average at the start $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/machine.txt"
{ echo "== machine"; cat "$out/machine.txt"; } >&2

cargo build --release -p benches --bins >&2
cargo bench -p benches --bench memory --no-run >&2

echo "== 1. Redis store vs redis-benchmark (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${CARGO_TARGET_DIR:-target}/release/redis" | tee "$out/redis.jsonl"

echo "== 2-3. in-process store vs governor, allocations, attribute overhead (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
# shellcheck disable=SC2086 # CRITERION_ARGS is a list of arguments
cargo bench -p benches --bench memory -- ${CRITERION_ARGS:-} 2>&1 \
  | python3 benches/criterion_ratios.py | tee "$out/memory.jsonl"

echo "== 2-3 again: each pair in ${ROUNDS:-7} alternating rounds, their median (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
ROUNDS=${ROUNDS:-7} bash benches/alternate.sh | tee "$out/alternate.jsonl"

echo "== 4. scaling (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${CARGO_TARGET_DIR:-target}/release/scaling" | tee "$out/scaling.jsonl"

echo "== 5. the sliding window counter's accuracy against the log (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${CARGO_TARGET_DIR:-target}/release/accuracy" | tee "$out/accuracy.jsonl"

echo "== 6. a flood of denied calls, with and without the deny cache (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${CARGO_TARGET_DIR:-target}/release/flood" | tee "$out/flood.jsonl"

echo "== 7. quota leases: one hot key against redis-benchmark -c 50 -P 16, and 100 per minute (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${CARGO_TARGET_DIR:-target}/release/lease" | tee "$out/lease.jsonl"

echo "== 7b. the registry on the Redis check: a key among 10,000 overrides against none, alternating rounds (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${CARGO_TARGET_DIR:-target}/release/registry" | tee "$out/registry.jsonl"

echo "== 7c. the limits shared through Redis: the check beside a follower, alternating rounds; what following costs; a change's way to another instance (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${CARGO_TARGET_DIR:-target}/release/shared_limits" | tee "$out/shared_limits.jsonl"

echo "== 7d. concurrency limits: acquire against a check at c = 1 and c = 50, alternating rounds; renewals at rest (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${CARGO_TARGET_DIR:-target}/release/concurrency" | tee "$out/concurrency.jsonl"

if command -v valgrind >/dev/null; then
  echo "== 8. instructions per in-process check (callgrind: 300,000 checks less 100,000, quanta's calibration left out)" >&2
  cg=$(mktemp)
  for mode in deny admit attribute counter-deny counter-admit attribute-entries keyed keyed-overrides governor-deny governor-admit; do
    # governor's, the reference, from a binary of its own (`icount_governor deny|admit`).
    binary=icount; arg=$mode
    if [[ $mode == governor-* ]]; then binary=icount_governor; arg=${mode#governor-}; fi
    # The run's instructions, less those of the clock's one-time calibration against the OS
    # clock (quanta's, in a `OnceCell`), whose count varies from run to run by tens of
    # instructions per check; what remains is the same in every run.
    count() {
      valgrind --tool=callgrind --callgrind-out-file="$cg" \
        "${CARGO_TARGET_DIR:-target}/release/$binary" "$arg" "$1" >/dev/null 2>&1
      callgrind_annotate --inclusive=yes "$cg" | python3 -c 'import re,sys
total = calibration = 0
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+)\s+\(.*?\)\s+(.*)", line)
    if m:
        n = int(m.group(1).replace(",", ""))
        if "PROGRAM TOTALS" in m.group(2):
            total = n
        elif "OnceCell<T>::initialize::{{closure}}" in m.group(2):
            calibration = max(calibration, n)
print(total - calibration)'
    }
    low=$(count 100000); high=$(count 300000)
    python3 -c "import json,sys; print(json.dumps({'name': 'instructions', 'mode': sys.argv[1], 'per_check': round((int(sys.argv[3]) - int(sys.argv[2])) / 200000, 1)}))" \
      "$mode" "$low" "$high" | tee -a "$out/icount.jsonl"
  done
  rm -f "$cg"
fi

echo "== summary (BENCHMARKS.md's table: python3 benches/summary.py --write)" >&2
python3 benches/summary.py "$out" >&2
