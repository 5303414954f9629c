#!/usr/bin/env bash
# round-five-profiles.sh: the CPU profiles behind round five's gaps
# (docs/performance.md, "Round five: where the gaps go"). For each gap, the
# two targets it compares are loaded one after the other at one
# concurrency, each alone (-only), with the servers' process profiled; for
# each it writes OUT/<target>-<mode>.pprof, the run's report
# OUT/<target>-<mode>.log, and OUT/<target>-<mode>.txt: the server CPU per
# request and where it goes (pprof -top -cum, the gateway's functions and
# the runtime's network, allocation and GC entries).
#
#   cmd/gatewaybench/round-five-profiles.sh [OUT, default ./round-five-profiles]
#
# Environment: C (default 50), DURATION (default 8s), PORT of the private
# redis-server (default 6392, must be free). About 3 minutes. Run it on a
# quiet machine, like round-five.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-round-five-profiles}
port=${PORT:-6392}
workers=${C:-50}
# shellcheck source=cmd/gatewaybench/private-redis.sh
source cmd/gatewaybench/private-redis.sh
start_private_redis "$port"
mkdir -p "$out"
go build -o "$out/gatewaybench" ./cmd/gatewaybench
echo "round-five-profiles: $(uptime)"

# profile TARGET MODE FLAGS...: load TARGET alone in MODE, profiled.
profile() {
  local target=$1 mode=$2 name="$1-$2"
  shift 2
  "$out/gatewaybench" -redis "127.0.0.1:$port" -only "$target" -mode "$mode" -c "$workers" \
    -d "${DURATION:-8s}" -rounds 1 -cpuprofile "$out/$name.pprof" "$@" >"$out/$name.log" 2>&1
  {
    grep -o '"rps":[0-9.]*\|"server_cpu_us_per_request":[0-9.]*\|"redis_cpu_us_per_request":[0-9.]*\|"p99_ms":[0-9.]*' "$out/$name.log" | tr '\n' ' '
    echo
    go tool pprof -top -cum "$out/gatewaybench" "$out/$name.pprof" 2>/dev/null |
      grep -E '^(Duration|Showing)|toolgateway|net/http\.\(\*conn\)\.serve$|linux\.Syscall6$|runtime\.mallocgc$|runtime\.gcBgMarkWorker$|cel-go/cel\.\(\*prog\)|modelcontextprotocol/go-sdk/mcp\.\(\*Server\)' |
      head -60 || true # head closes the pipe early: not a failure
  } >"$out/$name.txt"
  echo "$name: $(head -1 "$out/$name.txt")"
}

# REST, profile bare, against the floor (fresh and replay).
for mode in fresh replay; do
  profile floor "$mode" -profile bare -api rest
  profile gateway "$mode" -profile bare -api rest
done
# The default config (bare with receipts on) against bare.
profile gateway+receipts fresh -profile bare -api rest -receipts
# Profile everything, REST, against the floor above.
for mode in fresh replay; do
  profile gateway+everything "$mode" -profile everything -api rest
done
# MCP, profile everything, against a plain go-sdk server.
for mode in fresh replay; do
  profile plain-mcp "$mode" -profile everything -api mcp
  profile gateway-mcp+everything "$mode" -profile everything -api mcp
done
