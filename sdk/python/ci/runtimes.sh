#!/usr/bin/env bash
# The Python runtime adapters' tests (sdk/python/tests/runtimes), one venv per
# runtime x {oldest, newest} of sdk/python/tests/runtimes/matrix.json:
# `./sdk/python[<extra>]` + the entry's pins + pytest, installed with uv
# (wheels cached under ~/.cache/toolgateway/uv between phases and runs, the
# venvs themselves are fresh each time), then the entry's tests with pytest.
#
#   sdk/python/ci/runtimes.sh [RUNTIME ...]   # default: every entry
#
# The "without the gateway" half of each fault scenario (recorded for the
# double-execution matrix, never asserted) runs on the newest versions only;
# set TOOLGATEWAY_MATRIX_OUT=FILE to collect the matrix lines there.
# Exit status: non-zero if any install or test fails, or if an entry
# selects no test (pytest's exit 5 is a failure here, not a pass).
set -euo pipefail
cd "$(dirname "$0")/../../.."
repo=$(pwd)
matrix=sdk/python/tests/runtimes/matrix.json
cache="${HOME}/.cache/toolgateway"
export UV_CACHE_DIR="${cache}/uv"
export UV_NO_PROGRESS=1
mkdir -p "${cache}"

# uv itself, pinned, from the package index into a venv of its own (once).
uv_version=0.13.9
uv="${cache}/uv-${uv_version}/bin/uv"
if [ ! -x "${uv}" ]; then
  python3 -m venv "${cache}/uv-${uv_version}"
  "${cache}/uv-${uv_version}/bin/pip" install -q "uv==${uv_version}"
fi

# One line per run: runtime, extra, python, label, tests (space-separated), pins.
runs=$(python3 - "${matrix}" "$@" <<'PY'
import json, sys
entries = json.load(open(sys.argv[1]))
wanted = set(sys.argv[2:])
known = {e["runtime"] for e in entries}
unknown = wanted - known
if unknown:
    sys.exit(f"runtimes.sh: unknown runtime(s) {sorted(unknown)}; matrix.json has {sorted(known)}")
for e in entries:
    if wanted and e["runtime"] not in wanted:
        continue
    if not e.get("tests"):
        sys.exit(f"runtimes.sh: {e['runtime']} lists no tests")
    labels = [("oldest", e["oldest"])]
    if e["newest"] != e["oldest"]:
        labels.append(("newest", e["newest"]))
    for label, pins in labels:
        # newest runs last for each runtime: it also runs the "without" half.
        last = label == labels[-1][0]
        print("\t".join([e["runtime"], e["extra"], e.get("python", "3.11"), label, "1" if last else "0",
                         " ".join(e["tests"]), " ".join(pins)]))
PY
)

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
# The package is built from a copy: a build leaves build/ and *.egg-info
# beside its sources, and .ci/run builds ./sdk/python in another phase
# while this one runs in the background.
src="${tmp}/sdk-python"
cp -r sdk/python "${src}"
rm -rf "${src}/build" "${src}"/*.egg-info
failed=()
while IFS=$'\t' read -r runtime extra python label full tests pins; do
  [ -n "${runtime}" ] || continue
  echo "-- ${runtime} (${label}: ${pins})"
  venv="${tmp}/${runtime}-${label}"
  started=$(date +%s)
  # shellcheck disable=SC2086  # pins and tests are space-separated lists
  if ! { "${uv}" venv -q -p "${python}" "${venv}" \
        && VIRTUAL_ENV="${venv}" "${uv}" pip install -q "${src}[${extra}]" ${pins} pytest; }; then
    failed+=("${runtime}/${label}: install"); continue
  fi
  # The extra installed; the core still imports nothing of it.
  if ! "${venv}/bin/python" -c '
import sys, toolgateway
loaded = sorted(m for m in ("httpx", "langgraph", "langchain_core", "agents", "openai", "pydantic_ai", "google", "crewai", "mcp") if m in sys.modules)
assert not loaded, f"import toolgateway loaded {loaded}"
'; then
    failed+=("${runtime}/${label}: import toolgateway pulled in a runtime"); continue
  fi
  skip_without=1; matrix_out=""
  if [ "${full}" = 1 ]; then skip_without=0; matrix_out="${TOOLGATEWAY_MATRIX_OUT:-}"; fi
  set +e
  # shellcheck disable=SC2086
  (cd sdk/python/tests/runtimes && TOOLGATEWAY_SKIP_WITHOUT="${skip_without}" TOOLGATEWAY_MATRIX_OUT="${matrix_out}" \
    "${venv}/bin/python" -m pytest -q -p no:cacheprovider ${tests})
  status=$?
  set -e
  echo "   ${runtime} ${label}: pytest exit ${status} in $(( $(date +%s) - started )) s (install included)"
  case "${status}" in
    0) ;;
    5) failed+=("${runtime}/${label}: pytest collected no tests (exit 5)") ;;
    *) failed+=("${runtime}/${label}: pytest exit ${status}") ;;
  esac
  rm -rf "${venv}"
done <<< "${runs}"
cd "${repo}"
if [ "${#failed[@]}" -gt 0 ]; then
  printf 'FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "python runtimes: all passed"
