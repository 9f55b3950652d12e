#!/usr/bin/env bash
# The whole comparison of BENCHMARKS.md, in one run: the machine, the Redis store against
# redis-benchmark (the physical limit) and the seeds' script, the in-process store against
# governor with allocations per check and the attribute's overhead (criterion), scaling, and
# the sliding window counter's accuracy against the log.
#
#   bash benches/run.sh                  # everything, a private redis-server per binary
#   BENCH_REDIS_URL=redis://127.0.0.1:6379/ bash benches/run.sh   # against your server
#
# JSON lines go to stdout and to $BENCH_OUT (default $CARGO_TARGET_DIR or target, then
# bench-results/*.jsonl); progress,
# criterion's report and the tables go to stderr. Settings: see BENCHMARKS.md (BENCH_*).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${BENCH_OUT:-${CARGO_TARGET_DIR:-target}/bench-results}
mkdir -p "$out"

{
  echo "== machine"
  echo "nproc: $(nproc)"
  grep -m1 'model name' /proc/cpuinfo || true
  redis-server --version || true
  rustc --version
  uptime
} >&2

cargo build --release -p benches --bins >&2
cargo bench -p benches --bench memory --no-run >&2

echo "== 1. Redis store vs redis-benchmark (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${CARGO_TARGET_DIR:-target}/release/redis" | tee "$out/redis.jsonl"

echo "== 2-3. in-process store vs governor, allocations, attribute overhead (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
# shellcheck disable=SC2086 # CRITERION_ARGS is a list of arguments
cargo bench -p benches --bench memory -- ${CRITERION_ARGS:-} 2>&1 \
  | python3 benches/criterion_ratios.py | tee "$out/memory.jsonl"

echo "== 4. scaling (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${CARGO_TARGET_DIR:-target}/release/scaling" | tee "$out/scaling.jsonl"

echo "== 5. the sliding window counter's accuracy against the log (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${CARGO_TARGET_DIR:-target}/release/accuracy" | tee "$out/accuracy.jsonl"

echo "== 6. a flood of denied calls, with and without the deny cache (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${CARGO_TARGET_DIR:-target}/release/flood" | tee "$out/flood.jsonl"
