#!/usr/bin/env bash
# stage-costs.sh: what each of round five's stages added to a call that
# does not use it (docs/performance.md, "Round five: each stage against
# the commit before it"). For each stage, the gateway's request benchmark
# (BenchmarkRequest: the REST call path, fresh and replay, on the stub
# store and on Redis) runs at the commit that merged the stage and at the
# commit before it, alternated COUNT times, and benchstat compares them.
#
#   cmd/gatewaybench/stage-costs.sh [OUT, default ./stage-costs]
#
# Environment: COUNT (default 8), BENCH (default the stub and redis
# request benchmarks), BENCHTIME (default 1s). Needs a Redis on
# 127.0.0.1:6379 (the benchmarks' keys are under a prefix of their own,
# removed afterwards) and benchstat (go install
# golang.org/x/perf/cmd/benchstat@latest). About 15 minutes. Run it on a
# quiet machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-stage-costs}
count=${COUNT:-8}
bench=${BENCH:-'BenchmarkRequest/^(stub|redis)$/^(fresh|replay)$'}
mkdir -p "$out"
work=$(mktemp -d)
trap 'git worktree remove --force "$work/tree" 2>/dev/null || true; rm -rf "$work"' EXIT

# The stages and the merge commits that brought them (git log --merges).
stages=(
  "principals-quorum 3c0a1de"  # approvals: principals, four eyes, quorum
  "checkpoints 83692ef"        # evidence: signed checkpoints, anchors
  "pins 2517c56"               # MCP tool pins
  "budgets a455497"            # budgets reserved in the claim
)

# test binary COMMIT: build the gateway package's tests at COMMIT.
build() {
  git worktree remove --force "$work/tree" 2>/dev/null || true
  git worktree add --detach -q "$work/tree" "$1"
  (cd "$work/tree" && go test -c -o "$work/$1.test" ./gateway/)
  git worktree remove --force "$work/tree"
}

for entry in "${stages[@]}"; do
  read -r stage merge <<<"$entry"
  before=$(git rev-parse --short "$merge^1")
  build "$before"
  build "$merge"
  : >"$out/$stage-before.txt"
  : >"$out/$stage-after.txt"
  # Alternated, one run each at a time, so drift falls on both sides.
  for _ in $(seq "$count"); do
    (cd gateway && "$work/$before.test" -test.run '^$' -test.bench "$bench" -test.benchtime "${BENCHTIME:-1s}" -test.count 1 -test.benchmem) >>"$out/$stage-before.txt"
    (cd gateway && "$work/$merge.test" -test.run '^$' -test.bench "$bench" -test.benchtime "${BENCHTIME:-1s}" -test.count 1 -test.benchmem) >>"$out/$stage-after.txt"
  done
  echo "== $stage: $before (before) against $merge (the stage's merge)" | tee "$out/$stage.benchstat"
  benchstat "$out/$stage-before.txt" "$out/$stage-after.txt" | tee -a "$out/$stage.benchstat"
done
