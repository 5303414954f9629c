"""Test harness of the runtime adapters' tests (pytest, tests/runtimes).

Everything a runtime's crash test needs outside the agent process:

- :class:`CountingUpstream`: the tools' HTTP backend, in the test process, so
  its counts survive a ``kill -9`` of the agent. It counts every request per
  tool BEFORE answering (an execution is a request that arrived), can hold a
  tool's requests until released, and records bodies and identity headers.
- :class:`Gateway`: the real gateway binary (built once with ``go build``)
  with HTTP upstream tools pointing at a CountingUpstream, a tenant token,
  an admin token, ``decide`` rules for approvals; ``kill()``/``restart()``.
- :class:`AgentProcess`: an agent script of ``agents/`` run with this
  interpreter; markers it prints let a test ``kill9()`` it at a precise point.
- :func:`matrix_record`: one line of the double-execution matrix.

Executions are always counted at the upstream, never from what the agent
printed.
"""

import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import http.server
import uuid
from typing import Any, Callable, Dict, Iterable, List, Optional

RUNTIMES_DIR = os.path.dirname(os.path.abspath(__file__))
AGENTS_DIR = os.path.join(RUNTIMES_DIR, "agents")
TESTS_DIR = os.path.dirname(RUNTIMES_DIR)
SDK_DIR = os.path.dirname(TESTS_DIR)
REPO_ROOT = os.path.dirname(os.path.dirname(SDK_DIR))

for _path in (SDK_DIR, TESTS_DIR):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from _support import go_binary  # noqa: E402  (needs TESTS_DIR on sys.path)

__all__ = ["AgentProcess", "CountingUpstream", "Gateway", "matrix_record", "go_binary",
           "AGENTS_DIR", "SDK_DIR", "REPO_ROOT", "TENANT_TOKEN", "ADMIN_TOKEN", "TENANT"]

#: The agent tenant's bearer token of every harness gateway.
TENANT = "py-runtimes"
TENANT_TOKEN = "py-runtimes-agent-token"
#: The admin token (admin API and ``gateway admin``).
ADMIN_TOKEN = "py-runtimes-admin-token"

#: How long a harness wait lasts before it fails the test (never a speed
#: assertion: only a bound on a hang).
WAIT = 60.0


# --- the upstream -------------------------------------------------------------

class CountingUpstream:
    """The HTTP backend of the tools: ``POST /<tool>`` (any path; the tool is
    the path's last segment).

    Each request is counted and recorded before anything else happens; then,
    if the tool is held, it blocks until :meth:`release`; then it answers
    ``200`` with ``respond(tool, args, n)`` (set with :meth:`set_response`)
    or by default ``{"tool": tool, "args": args, "execution": n}`` where n is
    the 1-based count of that tool's requests.

    Use as a context manager (starts a threaded server on a free port)."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._requests: Dict[str, List[Dict[str, Any]]] = {}
        self._held: Dict[str, threading.Event] = {}
        self._responders: Dict[str, Callable[[str, Any, int], Any]] = {}
        self._server: Optional[http.server.ThreadingHTTPServer] = None
        self.url = ""

    def __enter__(self) -> "CountingUpstream":
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
                tool = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
                answer = upstream._handle(tool, body, dict(self.headers.items()))
                payload = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                # A client killed while its request was held: expected here.
                if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
                    super().handle_error(request, client_address)

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Release every held tool and stop the server."""
        with self._lock:
            for event in self._held.values():
                event.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def env(self) -> Dict[str, str]:
        """The environment an agent script reads the upstream from
        (``TOOLGATEWAY_UPSTREAM_URL``): a tool run without the gateway posts
        straight to it (agents/agent_support.py)."""
        return {"TOOLGATEWAY_UPSTREAM_URL": self.url}

    def tool_url(self, tool: str) -> str:
        """The URL a gateway tool (or a tool calling directly) posts to."""
        return f"{self.url}/{tool}"

    def _handle(self, tool: str, body: bytes, headers: Dict[str, str]) -> Any:
        try:
            args = json.loads(body) if body else None
        except ValueError:
            args = body.decode("utf-8", "replace")
        lower = {k.lower(): v for k, v in headers.items()}
        with self._lock:
            requests = self._requests.setdefault(tool, [])
            requests.append({"body": body, "args": args,
                             "idempotency_key": lower.get("idempotency-key", ""),
                             "session_id": lower.get("agent-session-id", ""),
                             "step_index": lower.get("agent-step-index", ""),
                             "headers": lower})
            n = len(requests)
            held = self._held.get(tool)
            responder = self._responders.get(tool)
            self._lock.notify_all()
        if held is not None:
            held.wait()
        if responder is not None:
            return responder(tool, args, n)
        return {"tool": tool, "args": args, "execution": n}

    def set_response(self, tool: str, respond: Callable[[str, Any, int], Any]) -> None:
        """Answer ``tool``'s requests with ``respond(tool, args, n)`` (JSON-able)."""
        with self._lock:
            self._responders[tool] = respond

    def hold(self, tool: str) -> None:
        """Block ``tool``'s requests (after counting them) until :meth:`release`."""
        with self._lock:
            self._held[tool] = threading.Event()

    def release(self, tool: str) -> None:
        """Let ``tool``'s held requests (and later ones) answer."""
        with self._lock:
            event = self._held.pop(tool, None)
        if event is not None:
            event.set()

    def wait_arrived(self, tool: str, n: int = 1, timeout: float = WAIT) -> None:
        """Block until ``tool`` has received ``n`` requests in all."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._requests.get(tool, [])) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"upstream: {tool} received {self.count(tool)} request(s), "
                                         f"not {n}, within {timeout:.0f} s")
                self._lock.wait(left)

    def count(self, tool: Optional[str] = None) -> int:
        """Requests received by ``tool`` (all tools when None): its executions."""
        with self._lock:
            if tool is None:
                return sum(len(r) for r in self._requests.values())
            return len(self._requests.get(tool, []))

    def requests(self, tool: str) -> List[Dict[str, Any]]:
        """The requests ``tool`` received, oldest first: dicts with ``body``
        (bytes), ``args`` (decoded), ``idempotency_key``, ``session_id``,
        ``step_index`` and ``headers`` (lower-case names)."""
        with self._lock:
            return list(self._requests.get(tool, []))


# --- the gateway --------------------------------------------------------------

class Gateway:
    """The real gateway binary on a free port, as a context manager.

    Args:
        config_tools: the tools, as dicts of the config's ``tools[]`` entries
            (``name`` required; ``decide``, ``effect_key``, ``lease_expiry``,
            ``input_schema``, ``timeout``... as docs/configuration.md). A tool
            without ``http`` gets ``http.url`` = the upstream's URL for it.
        upstream: the CountingUpstream the tools post to.
        store: ``"embedded"`` (a bbolt file in a temporary directory), a
            ``redis://`` URL (a fresh key prefix) or a ``postgres://`` URL (a
            fresh schema, dropped at :meth:`stop` when psql is there).
        auth: require the tenant token :data:`TENANT_TOKEN` (``.token``).
        extra: more top-level config members (merged last).

    ``.url``, ``.token``, ``.admin_token``; ``.admin(*args)`` runs
    ``gateway admin``; ``.approvals()``, ``.approve(id)``, ``.deny(id, reason)``;
    ``.kill()`` (SIGKILL), ``.restart()`` (same port, same store), ``.stop()``.
    """

    def __init__(self, config_tools: Iterable[Dict[str, Any]] = (), *, upstream: Optional[CountingUpstream] = None,
                 store: str = "embedded", auth: bool = True, extra: Optional[Dict[str, Any]] = None) -> None:
        self.binary = go_binary("./cmd/gateway")
        self.dir = tempfile.mkdtemp(prefix="toolgateway-py-runtimes-")
        self.config_path = os.path.join(self.dir, "gateway.yaml")
        self.token = TENANT_TOKEN if auth else None
        self.admin_token = ADMIN_TOKEN
        self.store = store
        self._schema = ""
        tools = []
        for tool in config_tools:
            tool = dict(tool)
            if "name" not in tool:
                raise ValueError("harness: every tool needs a name")
            if "http" not in tool:
                if upstream is None:
                    raise ValueError(f"harness: tool {tool['name']} has no http and no upstream was given")
                tool["http"] = {"url": upstream.tool_url(tool["name"])}
            tools.append(tool)
        config: Dict[str, Any] = {
            "listen": "127.0.0.1:0",
            "log_level": "info",
            "admin": {"token_sha256": hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest()},
            "tools": tools,
        }
        if auth:
            config["auth"] = {"tenants": [{"name": TENANT,
                                           "token_sha256": hashlib.sha256(TENANT_TOKEN.encode()).hexdigest()}]}
        if store == "embedded":
            config["store"] = {"path": "store/gateway.db"}
        elif store.startswith(("redis://", "rediss://")):
            config["store"] = {"redis_url": store, "key_prefix": f"pyrt-{uuid.uuid4().hex[:12]}:"}
        elif store.startswith(("postgres://", "postgresql://")):
            self._schema = f"pyrt_{uuid.uuid4().hex[:12]}"
            config["store"] = {"postgres_url": store, "postgres_schema": self._schema}
        else:
            raise ValueError(f"harness: store {store!r}: want 'embedded', a redis:// or a postgres:// URL")
        config.update(extra or {})
        self.config = config
        self.proc: Optional[subprocess.Popen] = None
        self.log: List[str] = []
        self.url = ""
        self._write_config()
        self._start()
        # Later starts (restart) keep the port, so agents keep their URL.
        self.config["listen"] = self.url[len("http://"):]
        self._write_config()

    def _write_config(self) -> None:
        # JSON is YAML: no YAML library needed.
        with open(self.config_path, "w") as f:
            json.dump(self.config, f, indent=1)

    def _start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
        self.proc = subprocess.Popen([self.binary, "-config", self.config_path], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env)
        listening: "queue.Queue[str]" = queue.Queue()
        proc = self.proc

        def read_log() -> None:
            for line in proc.stdout:  # the whole log, so the pipe never fills
                self.log.append(line)
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and entry.get("msg") == "gateway listening":
                    listening.put(entry["addr"])
            listening.put("")  # exited: stop waiting

        self._reader = threading.Thread(target=read_log, daemon=True)
        self._reader.start()
        try:
            addr = listening.get(timeout=WAIT)
        except queue.Empty:
            addr = ""
        if not addr:
            self.kill()
            raise AssertionError("gateway did not report listening:\n" + "".join(self.log))
        self.url = "http://" + addr
        self._wait_ready()

    def _wait_ready(self) -> None:
        import urllib.request
        deadline = time.monotonic() + WAIT
        while True:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=5) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("gateway /readyz not 200:\n" + "".join(self.log[-30:]))
            time.sleep(0.05)

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def env(self) -> Dict[str, str]:
        """The environment an agent script reads the gateway from:
        ``TOOLGATEWAY_URL`` and ``TOOLGATEWAY_TOKEN``."""
        env = {"TOOLGATEWAY_URL": self.url}
        if self.token:
            env["TOOLGATEWAY_TOKEN"] = self.token
        return env

    def kill(self) -> None:
        """SIGKILL the gateway (the crash of its process)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=10)
            self._reader.join(timeout=10)
            self.proc.stdout.close()
            self.proc = None

    def restart(self) -> None:
        """Kill (if running) and start again on the same port and store."""
        self.kill()
        self._start()

    def stop(self) -> None:
        """Stop the gateway and remove its files (and its PostgreSQL schema)."""
        self.kill()
        if self._schema and shutil.which("psql"):
            subprocess.run(["psql", self.store, "-q", "-c", f"DROP SCHEMA IF EXISTS {self._schema} CASCADE"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            self._schema = ""
        shutil.rmtree(self.dir, ignore_errors=True)

    def admin(self, *args: str) -> str:
        """Run ``gateway admin -url <url> <args>`` with the admin token;
        returns stdout. Raises AssertionError with stderr when it fails."""
        env = dict(os.environ, GATEWAY_ADMIN_TOKEN=ADMIN_TOKEN, USER=os.environ.get("USER") or "harness")
        proc = subprocess.run([self.binary, "admin", "-url", self.url, *args], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=WAIT)
        if proc.returncode != 0:
            raise AssertionError(f"gateway admin {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def approvals(self, state: str = "PENDING") -> List[Dict[str, Any]]:
        """The approvals in ``state`` (``"all"`` for every one), oldest first,
        as the admin API's JSON objects (``id``, ``state``, ``tool``, ...)."""
        answer = json.loads(self.admin("-json", "approvals", "-state", state, "-all"))
        if isinstance(answer, dict):
            for member in ("approvals", "items"):
                if isinstance(answer.get(member), list):
                    return answer[member]
        return answer

    def wait_approval(self, tool: Optional[str] = None, timeout: float = WAIT) -> Dict[str, Any]:
        """Block until a pending approval (of ``tool`` if given) exists; return it."""
        deadline = time.monotonic() + timeout
        while True:
            for approval in self.approvals():
                if tool is None or approval.get("tool") == tool:
                    return approval
            if time.monotonic() > deadline:
                raise AssertionError(f"no pending approval{' of ' + tool if tool else ''} within {timeout:.0f} s")
            time.sleep(0.1)

    def approve(self, approval_id: str, note: str = "approved by the test") -> str:
        """``gateway admin approve ID``."""
        return self.admin("approve", approval_id, "-by", "harness", "-note", note)

    def deny(self, approval_id: str, reason: str = "denied by the test") -> str:
        """``gateway admin deny ID -reason R``."""
        return self.admin("deny", approval_id, "-by", "harness", "-reason", reason)


# --- the agent process --------------------------------------------------------

class AgentProcess:
    """``python agents/<script> <args>`` with this interpreter (the venv's),
    the SDK's source first on ``PYTHONPATH``, unbuffered output captured.

    ``wait_for(marker)`` blocks until a line containing ``marker`` is
    printed (and returns it); ``kill9()`` SIGKILLs the process; ``wait()``
    returns the exit status; ``output`` is everything printed so far
    (stdout and stderr interleaved); ``lines_with(prefix)``."""

    def __init__(self, script: str, *args: str, env: Optional[Dict[str, str]] = None,
                 python: Optional[str] = None) -> None:
        path = script if os.path.isabs(script) else os.path.join(AGENTS_DIR, script)
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env["PYTHONUNBUFFERED"] = "1"
        full_env["PYTHONPATH"] = os.pathsep.join(
            [SDK_DIR, AGENTS_DIR] + ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else []))
        self.script = script
        self.proc = subprocess.Popen([python or sys.executable, path, *args], env=full_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     cwd=AGENTS_DIR)
        self._lines: List[str] = []
        self._cond = threading.Condition()
        self._done = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._cond:
                self._lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._done = True
            self._cond.notify_all()

    @property
    def output(self) -> str:
        with self._cond:
            return "\n".join(self._lines)

    def lines_with(self, prefix: str) -> List[str]:
        """The printed lines starting with ``prefix``, the prefix removed."""
        with self._cond:
            return [line[len(prefix):].strip() for line in self._lines if line.startswith(prefix)]

    def wait_for(self, marker: str, timeout: float = WAIT) -> str:
        """Block until a line containing ``marker`` is printed; return it.
        Fails (with the output) if the process ends first or on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            seen = 0
            while True:
                for line in self._lines[seen:]:
                    if marker in line:
                        return line
                seen = len(self._lines)
                if self._done:
                    raise AssertionError(f"{self.script} ended (exit {self.proc.wait()}) without printing "
                                         f"{marker!r}:\n" + "\n".join(self._lines))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.script} did not print {marker!r} within {timeout:.0f} s:\n"
                                         + "\n".join(self._lines))
                self._cond.wait(left)

    def kill9(self) -> None:
        """SIGKILL the agent (no handler, no finally block runs)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._reader.join(timeout=10)

    def wait(self, timeout: float = WAIT) -> int:
        """Wait for the exit; return its status (kills it on timeout and fails)."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"{self.script} did not exit within {timeout:.0f} s:\n{self.output}") from None
        self._reader.join(timeout=10)
        return code

    def expect_success(self, timeout: float = WAIT) -> str:
        """Wait for exit status 0 (fails with the output otherwise); return the output."""
        code = self.wait(timeout)
        if code != 0:
            raise AssertionError(f"{self.script} exited {code}:\n{self.output}")
        return self.output

    def __enter__(self) -> "AgentProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.kill9()


# --- the matrix ---------------------------------------------------------------

#: The faults of the double-execution matrix (docs/runtimes.md).
FAULTS = ("lost_reply", "kill_mid_call", "kill_before_checkpoint", "regenerated_turn",
          "kill_paused_approval", "retry_changed_args")


def matrix_record(runtime: str, fault: str, with_gateway: bool, executions: int, **extra: Any) -> None:
    """Append one line of the double-execution matrix (JSON) to the file named
    by ``TOOLGATEWAY_MATRIX_OUT``; a no-op when it is not set. ``executions``
    is what the upstream counted."""
    out = os.environ.get("TOOLGATEWAY_MATRIX_OUT")
    if not out:
        return
    line = {"runtime": runtime, "fault": fault, "with_gateway": bool(with_gateway), "executions": int(executions)}
    line.update(extra)
    with open(out, "a") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")
