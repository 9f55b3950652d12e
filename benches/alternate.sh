#!/usr/bin/env bash
# The in-process ratios of BENCHMARKS.md, robust to a busy machine: each pair of criterion
# benches (ours and its reference) runs in alternation, one short run each per round, and
# the ratio is taken within each round; the median of the rounds is reported.
#
#   bash benches/alternate.sh            # 5 rounds
#   ROUNDS=9 bash benches/alternate.sh
#
# One JSON line per pair on stdout ({"bench","vs","ratios":[...],"median"}); criterion's
# output goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-5}

bench=$(cargo bench -p benches --bench memory --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "memory" and m.get("executable"):
        print(m["executable"])')

# The median time (ns) of one criterion bench, matched exactly.
median_ns() {
  # criterion's report is passed on to stderr (appended, whatever stderr is).
  "$bench" --bench "^$1\$" --warm-up-time 1 --measurement-time 2 2>&1 \
    | python3 -c 'import re,sys
units = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
for line in sys.stdin:
    sys.stderr.write(line)
    m = re.search(r"time:\s*\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
    if m:
        print(float(m.group(1)) * units[m.group(2)])'
}

pairs=(
  "memory_vs_governor/deny/ratelimit/1_threads memory_vs_governor/deny/governor/1_threads"
  "memory_vs_governor/admit/ratelimit/1_threads memory_vs_governor/admit/governor/1_threads"
  "memory_vs_governor/deny/ratelimit/2_threads memory_vs_governor/deny/governor/2_threads"
  "memory_vs_governor/admit/ratelimit/2_threads memory_vs_governor/admit/governor/2_threads"
  "memory_vs_governor/deny/counter/1_threads memory_vs_governor/deny/governor/1_threads"
  "memory_vs_governor/admit/counter/1_threads memory_vs_governor/admit/governor/1_threads"
  "memory_vs_governor/deny/counter/2_threads memory_vs_governor/deny/governor/2_threads"
  "memory_vs_governor/admit/counter/2_threads memory_vs_governor/admit/governor/2_threads"
  "macro_overhead/annotated_named macro_overhead/by_hand"
  "macro_overhead/annotated macro_overhead/by_hand"
)
for pair in "${pairs[@]}"; do
  read -r ours theirs <<<"$pair"
  ratios=()
  for ((round = 0; round < rounds; round++)); do
    # Who goes first alternates by round.
    if ((round % 2 == 0)); then
      a=$(median_ns "$ours"); b=$(median_ns "$theirs")
    else
      b=$(median_ns "$theirs"); a=$(median_ns "$ours")
    fi
    ratios+=("$(python3 -c "print(round($a / $b, 3))")")
  done
  python3 -c 'import json,statistics,sys
ours, theirs, *ratios = sys.argv[1:]
ratios = [float(r) for r in ratios]
print(json.dumps({"bench": ours, "vs": theirs, "ratios": ratios,
                  "median": statistics.median(ratios)}))' "$ours" "$theirs" "${ratios[@]}"
done
