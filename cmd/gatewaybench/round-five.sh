#!/usr/bin/env bash
# round-five.sh: the round-five measurement in one command
# (docs/performance.md, "Round five"): the gateway with profile bare and
# profile everything, over REST and MCP, fresh and replay, at C = 1, 10, 50
# and 200, beside the exactly-once floor, the chi baseline and a plain
# go-sdk MCP server, alternated in every round; medians of ROUNDS rounds.
# The targets: baseline, floor, gateway, gateway-mcp, gateway+receipts
# (profile bare with receipts on: the default config's gateway, REST, so
# receipts' share of a call is measured), gateway+everything,
# gateway-mcp+everything, plain-mcp.
# Writes OUT/sweep.json, OUT/sweep.csv, OUT/table.txt (the text table),
# OUT/run.log (every run's own report) and OUT/p99.svg (p99 against
# concurrency), and prints the table.
#
#   cmd/gatewaybench/round-five.sh [OUT, default ./round-five]
#
# Environment: DURATION per target and round (default 10s), ROUNDS
# (default 3), CONCURRENCY (default 1,10,50,200), PORT of the private
# redis-server (default 6391, must be free), EXTRA (more gatewaybench
# flags, e.g. "-everything-tool mcp"). With the defaults it runs
# 4 C x 2 modes x 8 targets x 3 rounds x 10 s plus warm-ups: about 35
# minutes.
#
# Needs redis-server and redis-cli. Redis is a private server started here
# (no persistence), so INFO cpu counts only this run. Run it on a quiet
# machine: `uptime` load average < 0.5 before it starts.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-round-five}
port=${PORT:-6391}
# shellcheck source=cmd/gatewaybench/private-redis.sh
source cmd/gatewaybench/private-redis.sh
start_private_redis "$port"
go build -o "$work/gatewaybench" ./cmd/gatewaybench
go build -o "$work/benchplot" ./cmd/benchplot

echo "round-five: $(uptime)"
# shellcheck disable=SC2086 # EXTRA is a list of flags
"$work/gatewaybench" -redis "127.0.0.1:$port" \
  -profile bare,everything -receipts -api rest,mcp -mode fresh,replay \
  -c "${CONCURRENCY:-1,10,50,200}" -d "${DURATION:-10s}" -rounds "${ROUNDS:-3}" \
  -out "$out" ${EXTRA:-} | tee "$work/run.log" || status=$?
# A failed correctness check (a step run twice, a receipt missing) makes
# the status non-zero; the table and the plot are still written.
mkdir -p "$out"
cp "$work/run.log" "$out/run.log"
if [[ -f "$out/sweep.json" ]]; then
  "$work/benchplot" -in "$out/sweep.json" -out "$out/p99.svg"
fi
exit "${status:-0}"
