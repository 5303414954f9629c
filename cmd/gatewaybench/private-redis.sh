# private-redis.sh, sourced by the measurement scripts beside it: start a
# private redis-server (no persistence, so INFO cpu and commandstats count
# only this run) on 127.0.0.1:$1, in a temporary directory, stopped and
# removed when the script exits. Sets work (the directory, for the
# script's own files too) and redis_pid.
start_private_redis() {
  local port=$1 who
  who=$(basename "$0" .sh)
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "$who: something already answers on 127.0.0.1:$port; set PORT to a free port" >&2
    exit 1
  fi
  work=$(mktemp -d)
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
  redis_pid=$!
  trap stop_private_redis EXIT
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
}

stop_private_redis() {
  kill "$redis_pid" 2>/dev/null || true
  wait "$redis_pid" 2>/dev/null || true
  rm -rf "$work"
}
