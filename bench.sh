#!/usr/bin/env bash
# The benchmark, from a fresh clone: bench/driver measures acpbridge side by
# side with its two reference agents (bench/floor, the least an ACP agent can
# do; bench/floortool, the floor doing acpbridge's protocol work for a tool
# call), interleaved rounds, and prints a Markdown table with the date, the
# machine, medians (min–max) and acpbridge's ratios to each. Then the stream
# length check (a 200,000-chunk stream's peak RSS against a 20,000-chunk
# one), and, when ../shared/bench is beside the repository, its cross-check
# against the Go and TypeScript SDK agents.
#
#   ./bench.sh                 # RUNS=5 rounds; RUNS=3 ./bench.sh for a quicker look
#   SHARED=0 ./bench.sh        # skip the ../shared/bench cross-check
set -euo pipefail
cd "$(dirname "$0")"
out=${BENCH_OUT:-/tmp/acpbridge-bench}
RUNS=${RUNS:-5}
mkdir -p "$out"
go build -o "$out/driver" ./bench/driver
go build -o "$out/floor" ./bench/floor
go build -o "$out/floortool" ./bench/floortool
CGO_ENABLED=0 go build -o "$out/acpbridge" .  # static: the README says why

acpbridge="$out/acpbridge --model replay:\$FIXTURE --state-dir \$STATE --max-turn-requests 1000000"
echo "== side by side ($(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
"$out/driver" --rounds "$RUNS" floor="$out/floor" floor-tool="$out/floortool --state-dir \$STATE" acpbridge="$acpbridge"

echo
echo "== stream length: acpbridge's peak RSS, 20,000 against 200,000 chunks of 64 bytes (3 rounds)"
for n in 20000 200000; do
  "$out/driver" --rounds 3 --n "$n" --m 10 --tabs 0 acpbridge="$acpbridge" |
    awk -F'|' -v n="$n" '/^\| acpbridge/ { gsub(/^ +| +$/, "", $7); gsub(/^ +| +$/, "", $6); print "  " n " chunks: peak RSS " $7 " MiB, " $6 " chunks/s" }'
done

shared=../shared/bench
if [ "${SHARED:-1}" != 0 ] && [ -x "$shared/run.sh" ]; then
  echo
  echo "== cross-check: $shared/run.sh (its own driver, with the Go and TypeScript SDK agents)"
  python3 "$shared/make-fixture.py" 20000 64 1000 > "$out/shared.replay.jsonl"
  state=$(mktemp -d)
  trap 'rm -rf "$state"' EXIT
  RUNS=$RUNS BENCH_OUT=$out/shared "$shared/run.sh" -- "$out/acpbridge" --model "replay:$out/shared.replay.jsonl" \
    --state-dir "$state" --max-turn-requests 5000
fi
