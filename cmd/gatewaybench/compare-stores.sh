#!/usr/bin/env bash
# compare-stores.sh: the same load against four gateway processes, one per
# store (embedded, Redis, Redis Cluster, PostgreSQL), one after the other in
# one run on one machine, so the req/s are comparable (docs/reliability.md,
# "Which store"). Every gateway serves the same HTTP upstream tool (the
# load tool's counting tool, served by gatewaybench -upstream).
#
#   cmd/gatewaybench/compare-stores.sh [duration, default 10s] [workers, default 32]
#
# Needs: redis-server and redis-cli, the machine's Redis on 127.0.0.1:6379
# (the tool's counters, and the Redis store under a random key prefix) and
# PostgreSQL on 127.0.0.1:5432 (database test, trust auth; user root or
# postgres; the store gets a schema of its own, dropped at the end). The
# Redis Cluster is a private one-node cluster serving every slot.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PGOPTIONS='-c client_min_messages=warning'
# STORES limits the run to some stores; PG_PARAMS is appended to the
# PostgreSQL URL's query (e.g. '&pool_max_conns=32').
duration=${1:-10s}
workers=${2:-32}
work=$(mktemp -d)
run_id=$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
prefix="gwstores:${run_id}:"
schema="gwbench_${run_id}"
pids=()
pg_user=root
psql -h 127.0.0.1 -U "$pg_user" -d test -qc 'SELECT 1' >/dev/null 2>&1 || pg_user=postgres
pg_url="postgres://${pg_user}@127.0.0.1:5432/test?sslmode=disable${PG_PARAMS:-}"

cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  redis-cli -p 6379 --scan --pattern "${prefix}*" | xargs -r -n 500 redis-cli -p 6379 DEL >/dev/null || true
  psql -h 127.0.0.1 -U "$pg_user" -d test -qc "DROP SCHEMA IF EXISTS ${schema} CASCADE" >/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/gateway" ./cmd/gateway
go build -o "$work/gatewaybench" ./cmd/gatewaybench

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

upstream=$(free_port)
"$work/gatewaybench" -upstream "127.0.0.1:${upstream}" -counters "${prefix}tool:" >"$work/upstream.log" 2>&1 &
pids+=($!)

cluster=$(free_port)
mkdir -p "$work/cluster"
redis-server --port "$cluster" --bind 127.0.0.1 --save '' --appendonly no --dir "$work/cluster" \
  --cluster-enabled yes --cluster-config-file nodes.conf >"$work/cluster.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do redis-cli -p "$cluster" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$cluster" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
for _ in $(seq 100); do redis-cli -p "$cluster" CLUSTER INFO | grep -q cluster_state:ok && break; sleep 0.1; done

psql -h 127.0.0.1 -U "$pg_user" -d test -qc "CREATE SCHEMA ${schema}" >/dev/null

declare -A stores=(
  [embedded]="  path: $work/embedded.db"
  [redis]="  redis_url: redis://127.0.0.1:6379/0
  key_prefix: \"${prefix}store:\""
  [redis-cluster]="  cluster_addrs: [\"127.0.0.1:${cluster}\"]
  key_prefix: \"${prefix}cluster:\""
  [postgres]="  postgres_url: ${pg_url}
  postgres_schema: ${schema}"
)
order=(${STORES:-embedded redis redis-cluster postgres})
declare -A ports
for name in "${order[@]}"; do
  port=$(free_port)
  ports[$name]=$port
  cat >"$work/$name.yaml" <<YAML
listen: 127.0.0.1:${port}
log_level: warn
store:
${stores[$name]}
tools:
  - name: bench-incr
    http:
      url: http://127.0.0.1:${upstream}/
YAML
  "$work/gateway" -config "$work/$name.yaml" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:${port}/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -fs "http://127.0.0.1:${port}/readyz" >/dev/null || { cat "$work/$name.log"; exit 1; }
done

for mode in fresh replay; do
  for name in "${order[@]}"; do
    echo "== $name, $mode"
    "$work/gatewaybench" -url "http://127.0.0.1:${ports[$name]}" -mode "$mode" -c "$workers" -d "$duration" \
      -rounds 1 -counters "${prefix}tool:" | grep -E '^\{' | tee -a "$work/results.jsonl" | head -c 2000
    echo
  done
done
