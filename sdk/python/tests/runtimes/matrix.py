"""The double-execution matrix: runtime × fault → executions at the upstream,
without the gateway and with it.

Runs each runtime's tests (matrix.json) in that runtime's virtualenv with
``TOOLGATEWAY_MATRIX_OUT`` set, collects the lines the tests write with
``harness.matrix_record`` — ``{runtime, fault, with_gateway, executions}``,
counted at the upstream — and prints a Markdown table. With ``--write`` it
replaces the part of docs/runtimes.md between the matrix markers::

    python sdk/python/tests/runtimes/matrix.py --write docs/runtimes.md
    python sdk/python/tests/runtimes/matrix.py --create --versions both
    python sdk/python/tests/runtimes/matrix.py --from-jsonl out/*.jsonl   # no run

A virtualenv is ``<venvs>/<runtime>-<oldest|newest>`` (``--venvs``, default
``$TOOLGATEWAY_VENVS`` or ``.venvs`` at the repository's root). ``--create``
makes a missing one, and brings an existing one to the entry's pins, with
``uv`` (``pip install uv`` into the Python running this script): the SDK
with the entry's extra, its pins and pytest. A runtime whose virtualenv is
missing, or whose tests fail, is not left out: its cells are ``—`` and a
note says why, as for a fault its tests do not record (one that does not
apply to it).

Standard library only (it runs with any Python 3.9+).
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Dict, Iterable, List, Optional, Tuple

RUNTIMES_DIR = os.path.dirname(os.path.abspath(__file__))
SDK_DIR = os.path.dirname(os.path.dirname(RUNTIMES_DIR))
REPO_ROOT = os.path.dirname(os.path.dirname(SDK_DIR))

#: The faults, in the table's column order, with their headings; the names
#: are those of harness.FAULTS.
FAULTS: Tuple[Tuple[str, str], ...] = (
    ("lost_reply", "lost reply"),
    ("kill_mid_call", "kill -9 mid-call"),
    ("kill_before_checkpoint", "kill -9 before the checkpoint"),
    ("regenerated_turn", "regenerated turn"),
    ("kill_paused_approval", "kill -9 paused for approval"),
    ("retry_changed_args", "retry with changed arguments"),
)

BEGIN = "<!-- matrix:begin (written by sdk/python/tests/runtimes/matrix.py; do not edit by hand) -->"
END = "<!-- matrix:end -->"

Record = Dict[str, object]


def load_entries(path: str) -> List[Dict[str, object]]:
    with open(path) as f:
        entries = json.load(f)
    if not isinstance(entries, list):
        raise SystemExit(f"matrix: {path}: want a JSON list of entries")
    return entries


def venv_python(venvs: str, runtime: str, version: str) -> str:
    return os.path.join(venvs, f"{runtime}-{version}", "bin", "python")


def create_venv(venvs: str, entry: Dict[str, object], version: str) -> None:
    """``uv venv`` (when missing) + ``uv pip install`` of the SDK with the
    entry's extra, its pins and pytest, so an existing virtualenv follows
    pins that changed (raises CalledProcessError when it fails)."""
    target = os.path.join(venvs, f"{entry['runtime']}-{version}")
    uv = [sys.executable, "-m", "uv"]
    if not os.path.exists(os.path.join(target, "bin", "python")):
        subprocess.run(uv + ["venv", "-q", "-p", str(entry.get("python", "3.11")), target], check=True)
    sdk = f"{SDK_DIR}[{entry['extra']}]" if entry.get("extra") else SDK_DIR
    subprocess.run(uv + ["pip", "install", "-q", "-p", os.path.join(target, "bin", "python"), "-e", sdk,
                         *entry.get(version, []), "pytest"], check=True)


def run_entry(python: str, entry: Dict[str, object], out: str) -> Tuple[bool, str]:
    """Run the entry's tests with ``python``; the records go to ``out``.
    Returns (passed, the last line pytest printed)."""
    tests = [os.path.join(RUNTIMES_DIR, name) for name in entry.get("tests", [])]
    env = dict(os.environ, TOOLGATEWAY_MATRIX_OUT=out)
    proc = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=SDK_DIR, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    sys.stderr.write(proc.stdout if proc.returncode else "")
    # "25 passed, 1 skipped in 93.21s (0:01:33)" -> "25 passed, 1 skipped": the committed
    # table must not change with the machine's speed.
    last = re.sub(r"\s+in [0-9.]+s.*$", "", lines[-1].strip("= ")) if lines else ""
    return proc.returncode == 0, last or f"exit {proc.returncode}"


def read_records(paths: Iterable[str]) -> Tuple[List[Record], List[str]]:
    """The records of record files, and the notes saved with them
    (``{"matrix_note": …, "entry": …}`` lines, written by ``--save-jsonl``)."""
    records, notes = [], []
    for path in paths:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                record = json.loads(line)
                if isinstance(record, dict) and isinstance(record.get("matrix_note"), str):
                    notes.append(record["matrix_note"])
                    continue
                if not isinstance(record, dict) or not set(CORE) <= set(record):
                    raise SystemExit(f"matrix: {path}:{number}: not a matrix record: {line.strip()}")
                records.append(record)
    return records, notes


def cell(values: List[int]) -> Optional[str]:
    """One number, or ``min–max`` when the runs disagree; None if no run."""
    if not values:
        return None
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}–{high}"


def rows_of(records: List[Record], entries: List[str]) -> List[str]:
    """The table's rows: the recorded runtimes in the order they were first
    recorded (an entry may record several: ``mcp`` records ``mcp`` and
    ``fastmcp``; ``adk`` records ``google-adk``: a record names its entry in
    ``entry``), then each entry that recorded nothing (so a runtime that did
    not run still has its row of ``—``)."""
    def same(name: str) -> str:  # openai-agents is openai_agents
        return name.replace("_", "-")

    rows: List[str] = []
    for record in records:
        if str(record["runtime"]) not in rows:
            rows.append(str(record["runtime"]))
    recorded = {same(row) for row in rows} | {same(str(r["entry"])) for r in records if "entry" in r}
    return rows + [name for name in entries if same(name) not in recorded]


#: The four members of every record; any other (``decision="deny"``) names a
#: variant of the fault, shown apart in its cell.
CORE = ("runtime", "fault", "with_gateway", "executions")
#: How a variant is named in a cell.
VARIANT_NAMES = {"decision=approve": "approved", "decision=deny": "denied"}


def variant(record: Record) -> str:
    label = ", ".join(f"{k}={record[k]}" for k in sorted(record) if k not in CORE and k != "entry")
    return VARIANT_NAMES.get(label, label)


def table(records: List[Record], rows: List[str], notes: List[str]) -> str:
    """The Markdown table (cells: ``without / with``, per variant) and its notes."""
    by_cell: Dict[Tuple[str, str, str, bool], List[int]] = {}
    variants: Dict[Tuple[str, str], List[str]] = {}
    for record in records:
        runtime, fault, name = str(record["runtime"]), str(record["fault"]), variant(record)
        by_cell.setdefault((runtime, fault, name, bool(record["with_gateway"])), []).append(
            int(record["executions"]))  # type: ignore[arg-type]
        names = variants.setdefault((runtime, fault), [])
        if name not in names:
            names.append(name)
    header = "| runtime | " + " | ".join(title for _, title in FAULTS) + " |"
    lines = [header, "|---" * (len(FAULTS) + 1) + "|"]
    dash_used = False
    for runtime in rows:
        cells = []
        for fault, _ in FAULTS:
            names = sorted(variants.get((runtime, fault), []), key=lambda n: (n != "approved", n))
            if not names:
                dash_used = True
                cells.append("—")
                continue
            parts = []
            for name in names:
                without = cell(by_cell.get((runtime, fault, name, False), []))
                with_gateway = cell(by_cell.get((runtime, fault, name, True), []))
                dash_used = dash_used or without is None or with_gateway is None
                parts.append(f"{without or '—'} / **{with_gateway or '—'}**" + (f" ({name})" if name else ""))
            cells.append("; ".join(parts))
        lines.append(f"| {runtime} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n\n"
    text += ("Each cell: executions counted at the upstream **without** the gateway / **with** it, "
             "for one call that the fault hits once (approved or denied: after the human's decision).")
    if dash_used:
        text += (" `—`: not recorded — the fault does not apply to the runtime (its tests do not "
                 "make it), or the runtime's tests were not run here (see below).")
    text += "\n"
    if notes:
        text += "\n" + "\n".join(f"- {note}" for note in notes) + "\n"
    return text


def rewrite(path: str, text: str) -> None:
    with open(path) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"matrix: {path} has no matrix markers ({BEGIN} … {END})")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + text + END + tail)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrix", default=os.path.join(RUNTIMES_DIR, "matrix.json"), help="the entries")
    parser.add_argument("--venvs", default=os.environ.get("TOOLGATEWAY_VENVS") or os.path.join(REPO_ROOT, ".venvs"),
                        help="where <runtime>-<oldest|newest> virtualenvs are")
    parser.add_argument("--versions", choices=["newest", "oldest", "both"], default="newest")
    parser.add_argument("--runtime", action="append", default=[], help="only this entry (repeatable)")
    parser.add_argument("--create", action="store_true",
                        help="create missing virtualenvs with uv, and install the pins into existing ones")
    parser.add_argument("--from-jsonl", nargs="+", default=[], metavar="FILE",
                        help="build the table from these records instead of running the tests")
    parser.add_argument("--write", metavar="DOC", help="rewrite the matrix section of DOC (docs/runtimes.md)")
    parser.add_argument("--save-jsonl", metavar="FILE",
                        help="also write the collected records, and the notes, to FILE (for --from-jsonl)")
    args = parser.parse_args(argv)

    entries = load_entries(args.matrix)
    names = [str(e["runtime"]) for e in entries]
    unknown = set(args.runtime) - set(names)
    if unknown:
        raise SystemExit(f"matrix: no entry for {', '.join(sorted(unknown))} in {args.matrix} (have {', '.join(names)})")
    selected = [e for e in entries if not args.runtime or e["runtime"] in args.runtime]
    versions = ["oldest", "newest"] if args.versions == "both" else [args.versions]
    notes: List[str] = []
    failed = False

    if args.from_jsonl:
        paths = [p for pattern in args.from_jsonl for p in sorted(glob.glob(pattern))]
        if not paths:
            raise SystemExit("matrix: --from-jsonl matched no file")
        records, notes = read_records(paths)
    else:
        records = []
        with tempfile.TemporaryDirectory(prefix="toolgateway-matrix-") as tmp:
            for entry in selected:
                runtime = str(entry["runtime"])
                for version in versions:
                    python = venv_python(args.venvs, runtime, version)
                    pins = ", ".join(entry.get(version, [])) or "no pins"
                    if args.create:
                        try:
                            create_venv(args.venvs, entry, version)
                        except subprocess.CalledProcessError as err:
                            notes.append(f"{runtime} ({version}: {pins}): not run — its virtualenv could not be "
                                         f"created (exit {err.returncode}).")
                            failed = True
                            continue
                    if not os.path.exists(python):
                        notes.append(f"{runtime} ({version}: {pins}): not run — no virtualenv at "
                                     f"{os.path.relpath(os.path.dirname(os.path.dirname(python)), REPO_ROOT)} "
                                     "(`--create` makes it).")
                        continue
                    out = os.path.join(tmp, f"{runtime}-{version}.jsonl")
                    print(f"matrix: {runtime} ({version}) …", file=sys.stderr, flush=True)
                    passed, summary = run_entry(python, entry, out)
                    failed = failed or not passed
                    got = read_records([out])[0] if os.path.exists(out) else []
                    for record in got:
                        record["entry"] = runtime
                    records.extend(got)
                    verdict = "tests passed" if passed else "**tests failed**"
                    notes.append(f"{runtime} ({version}: {pins}): {verdict} ({summary}); {len(got)} record(s).")
    if args.save_jsonl:
        with open(args.save_jsonl, "w") as f:
            f.writelines(json.dumps(record, sort_keys=True) + "\n" for record in records)
            for note in notes:
                entry = note.split(" ", 1)[0]
                f.write(json.dumps({"entry": entry, "matrix_note": note}, sort_keys=True) + "\n")
    entry_names = [str(e["runtime"]) for e in selected]
    text = table(records, rows_of(records, entry_names), notes)
    print(text, end="")
    if args.write:
        rewrite(args.write, text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
