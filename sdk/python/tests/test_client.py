"""Client behaviour against a local scripted HTTP server: the request it
sends, retries with the same key, Retry-After, no retry of final answers,
the default bound, and bad input refused before anything is sent."""

import asyncio
import decimal
import http.server
import json
import math
import threading
import time
import unittest

from _support import closed_port

import toolgateway
from toolgateway import (Client, GatewayConnectionError, GatewayError, InvalidInputError, derive_key)
from toolgateway.client import DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_ELAPSED

OK = {"status": 200, "type": "application/json", "body": b'{"ok":true}',
      "headers": {"Idempotent-Replayed": "false", "Tool-Execution-Id": "01EXE", "X-Request-Id": "01REQ"}}
DROP = {"drop": True}


def problem(status, code, headers=None, **extra):
    doc = {"type": "urn:toolgateway:problem:" + code, "title": "t-" + code, "status": status,
           "detail": "d-" + code, "code": code,
           "retryable": code in ("request_in_progress", "store_unavailable", "tool_timeout", "tool_failed", "rate_limited"), **extra}
    return {"status": status, "type": "application/problem+json", "body": json.dumps(doc).encode(),
            "headers": headers or {}}


class ScriptedServer:
    """Answers request i with script[i] (the last entry repeats) and records
    every request."""

    def __init__(self, *script):
        self.script = list(script)
        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.requests.append({"path": self.path, "headers": self.headers, "body": body})
                answer = outer.script[min(len(outer.requests), len(outer.script)) - 1]
                if answer.get("drop"):
                    self.close_connection = True
                    return
                self.send_response(answer["status"])
                self.send_header("Content-Type", answer["type"])
                self.send_header("Content-Length", str(len(answer["body"])))
                for name, value in answer.get("headers", {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(answer["body"])

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class ClientTestCase(unittest.TestCase):
    def serve(self, *script):
        server = ScriptedServer(*script)
        self.addCleanup(server.close)
        return server

    def recording(self, client):
        """Replace the client's sleep with a recorder (and a clock it advances)."""
        sleeps = []
        now = [0.0]
        client._sleep = lambda s: (sleeps.append(s), now.__setitem__(0, now[0] + s))
        client._clock = lambda: now[0]
        return sleeps


class RequestTest(ClientTestCase):
    def test_sends_canonical_bytes_and_key_headers(self):
        server = self.serve(OK)
        client = Client(server.url + "/", token="secret-token")
        result = client.session("run-1").call(4, "provision-infra", {"size": "m5.large", "count": 3.0, "tags": {"b": 1, "a": 2}})
        key = derive_key("run-1", 4, "provision-infra", {"count": 3, "size": "m5.large", "tags": {"a": 2, "b": 1}})
        self.assertEqual(len(server.requests), 1)
        sent = server.requests[0]
        self.assertEqual(sent["path"], "/api/tools/v1/provision-infra")
        self.assertEqual(sent["body"], b'{"count":3,"size":"m5.large","tags":{"a":2,"b":1}}')
        h = sent["headers"]
        self.assertEqual((h["Content-Type"], h["Idempotency-Key"], h["Agent-Session-Id"], h["Agent-Step-Index"],
                          h["Authorization"], h["Prefer"]),
                         ("application/json", key, "run-1", "4", "Bearer secret-token", "wait=10"))
        self.assertEqual((result.status, result.body, result.replayed, result.execution_id, result.key,
                          result.request_id, result.attempts),
                         (200, b'{"ok":true}', False, "01EXE", key, "01REQ", 1))
        self.assertEqual(result.json(), {"ok": True})

    def test_prefer_wait_can_be_turned_off_and_stays_below_the_timeout(self):
        server = self.serve(OK)
        Client(server.url, prefer_wait=0).session("s").call(0, "t", {})
        self.assertNotIn("Prefer", server.requests[0]["headers"])
        self.assertEqual(Client(server.url, timeout=8).prefer_wait, 3)
        self.assertEqual(Client(server.url, timeout=300, prefer_wait=600).prefer_wait, 60)

    def test_tool_outcomes_are_results(self):
        server = self.serve({"status": 404, "type": "application/json", "body": b'{"error":"no such zone"}',
                             "headers": {"Idempotent-Replayed": "true", "Tool-Execution-Id": "01OLD"}})
        result = Client(server.url).session("s").call(2, "t", {})
        self.assertEqual((result.status, result.replayed, result.execution_id, result.body),
                         (404, True, "01OLD", b'{"error":"no such zone"}'))

    def test_redirects_are_answers_not_followed(self):
        server = self.serve({"status": 307, "type": "text/plain", "body": b"moved",
                             "headers": {"Location": "http://127.0.0.1:1/elsewhere"}})
        result = Client(server.url).session("s").call(0, "t", {})
        self.assertEqual((result.status, result.body, len(server.requests)), (307, b"moved", 1))

    def test_bytes_arguments_are_json_text(self):
        server = self.serve(OK)
        result = Client(server.url).session("s").call(1, "t", b'{ "b": 1.0, "a": "\\u0078" }')
        self.assertEqual(server.requests[0]["body"], b'{"a":"x","b":1}')
        self.assertEqual(result.key, derive_key("s", 1, "t", {"a": "x", "b": 1}))


class RetryTest(ClientTestCase):
    def test_transient_answers_are_retried_with_the_same_key(self):
        server = self.serve(DROP, problem(503, "store_unavailable"),
                            {"status": 502, "type": "text/plain", "body": b"bad gateway"},
                            problem(504, "tool_timeout"), problem(409, "request_in_progress"), OK)
        client = Client(server.url, initial_backoff=0.01, max_backoff=0.04)
        sleeps = self.recording(client)
        result = client.session("run-1").call(9, "provision-infra", {"n": 1})
        self.assertEqual((len(server.requests), result.attempts), (6, 6))
        for sent in server.requests:
            self.assertEqual((sent["headers"]["Idempotency-Key"], sent["body"], sent["headers"]["Agent-Step-Index"]),
                             (result.key, b'{"n":1}', "9"))
        # Equal jitter: retry n waits within [ceiling/2, ceiling], ceiling = min(0.01 * 2^n, 0.04).
        self.assertEqual(len(sleeps), 5)
        for delay, ceiling in zip(sleeps, (0.01, 0.02, 0.04, 0.04, 0.04)):
            self.assertGreaterEqual(delay, ceiling / 2)
            self.assertLessEqual(delay, ceiling)

    def test_retry_after_is_honoured(self):
        server = self.serve(problem(409, "request_in_progress", {"Retry-After": "3"}),
                            problem(503, "store_unavailable", {"Retry-After": "1"}), OK)
        client = Client(server.url, initial_backoff=0.001, max_backoff=0.002)
        sleeps = self.recording(client)
        client.session("s").call(0, "t", {})
        self.assertEqual(len(server.requests), 3)
        self.assertEqual(sleeps, [3.0, 1.0])

    def test_retry_after_is_waited_for_real(self):
        server = self.serve(problem(409, "request_in_progress", {"Retry-After": "1"}), OK)
        started = time.monotonic()
        result = Client(server.url, initial_backoff=0.001).session("s").call(0, "t", {})
        self.assertGreaterEqual(time.monotonic() - started, 1.0)
        self.assertEqual(result.attempts, 2)

    def test_final_answers_are_not_retried(self):
        cases = [
            (problem(400, "invalid_json"), 400, "invalid_json"),
            (problem(400, "invalid_arguments", errors=[{"location": "/size", "message": "must be a string"}]),
             400, "invalid_arguments"),
            (problem(401, "unauthorized"), 401, "unauthorized"),
            (problem(404, "tool_not_found"), 404, "tool_not_found"),
            (problem(409, "outcome_unknown"), 409, "outcome_unknown"),
            (problem(422, "idempotency_key_reused"), 422, "idempotency_key_reused"),
            (problem(422, "step_conflict", tool="provision-infra", execution_id="01EARLIER"), 422, "step_conflict"),
            (problem(429, "rate_limited", {"Retry-After": "2"}), 429, "rate_limited"),
            (problem(500, "tool_failed"), 500, "tool_failed"),
            ({"status": 500, "type": "text/plain", "body": b"boom"}, 500, ""),
        ]
        for answer, status, code in cases:
            with self.subTest(code=code or "plain 500"):
                server = self.serve(answer, OK)
                client = Client(server.url, initial_backoff=0.001)
                sleeps = self.recording(client)
                with self.assertRaises(GatewayError) as caught:
                    client.session("s").call(2, "t", {"a": 1})
                err = caught.exception
                self.assertEqual((err.status, err.code, err.body, len(server.requests), sleeps),
                                 (status, code, answer["body"], 1, []))
                if code == "step_conflict":
                    self.assertEqual(err.problem["execution_id"], "01EARLIER")
                if code == "invalid_arguments":
                    self.assertEqual(err.problem["errors"][0]["location"], "/size")
                if code == "rate_limited":
                    self.assertEqual(err.retry_after, 2.0)
                    self.assertTrue(err.retryable)

    def test_key_mismatch_details(self):
        server = self.serve(problem(422, "idempotency_key_mismatch", expected_key="ab" * 32,
                                    canonical_arguments='{"a":1}'))
        with self.assertRaises(GatewayError) as caught:
            Client(server.url).session("s").call(0, "t", {"a": 1})
        err = caught.exception
        self.assertEqual((err.code, err.expected_key, err.canonical_arguments, err.retryable),
                         ("idempotency_key_mismatch", "ab" * 32, '{"a":1}', False))
        self.assertEqual(str(err), "toolgateway: 422 idempotency_key_mismatch: t-idempotency_key_mismatch: "
                                   "d-idempotency_key_mismatch")

    def test_default_bound_against_a_closed_port(self):
        client = Client("http://127.0.0.1:%d" % closed_port())
        sleeps = self.recording(client)
        with self.assertRaises(GatewayConnectionError) as caught:
            client.session("s").call(0, "t", {})
        self.assertEqual(caught.exception.attempts, DEFAULT_MAX_ATTEMPTS)
        self.assertEqual(len(sleeps), DEFAULT_MAX_ATTEMPTS - 1)
        self.assertLessEqual(sum(sleeps), DEFAULT_MAX_ELAPSED)
        self.assertIsInstance(caught.exception.__cause__, OSError)

    def test_bound_ends_a_call_to_a_gateway_that_stays_down_for_real(self):
        # No recorded sleeps: the real delays of a small policy.
        client = Client("http://127.0.0.1:%d" % closed_port(), max_attempts=4, initial_backoff=0.01, max_backoff=0.05)
        with self.assertRaises(GatewayConnectionError) as caught:
            client.session("s").call(0, "t", {})
        self.assertEqual(caught.exception.attempts, 4)

    def test_elapsed_bound_stops_before_a_retry_after_it_cannot_wait(self):
        server = self.serve(problem(503, "store_unavailable", {"Retry-After": "20"}))
        client = Client(server.url, max_elapsed=30)
        sleeps = self.recording(client)
        with self.assertRaises(GatewayError) as caught:
            client.session("s").call(0, "t", {})
        self.assertEqual((caught.exception.code, caught.exception.attempts, sleeps), ("store_unavailable", 2, [20.0]))
        self.assertEqual(len(server.requests), 2)

    def test_last_retryable_answer_is_raised_when_attempts_run_out(self):
        server = self.serve(problem(409, "request_in_progress", {"Retry-After": "1"}))
        client = Client(server.url, max_attempts=3)
        self.recording(client)
        with self.assertRaises(GatewayError) as caught:
            client.session("s").call(0, "t", {})
        self.assertEqual((caught.exception.code, caught.exception.attempts, len(server.requests)),
                         ("request_in_progress", 3, 3))


class TypedErrorTest(ClientTestCase):
    """Each answer an agent must tell apart raises its own GatewayError
    subclass, so an adapter hands the app a type, never a text to parse."""

    def test_codes_raise_their_types(self):
        cases = [
            (problem(403, "call_denied", reason="rule says no"), toolgateway.CallDeniedError),
            (problem(403, "approval_denied", reason="no", by="maria"), toolgateway.ApprovalDeniedError),
            (problem(403, "approval_expired"), toolgateway.ApprovalExpiredError),
            (problem(422, "step_conflict", tool="x", execution_id="01E"), toolgateway.StepConflictError),
            (problem(409, "effect_conflict", execution_id="01E"), toolgateway.EffectConflictError),
            (problem(409, "outcome_unknown"), toolgateway.OutcomeUnknownError),
            (problem(503, "store_unavailable"), toolgateway.GatewayUnavailableError),
            ({"status": 502, "type": "text/html", "body": b"<html>bad gateway</html>"}, toolgateway.GatewayUnavailableError),
            (problem(500, "tool_failed"), toolgateway.ToolFailedError),
            (problem(404, "tool_not_found"), GatewayError),
        ]
        for answer, expected in cases:
            server = self.serve(answer)
            client = Client(server.url, max_attempts=2)
            self.recording(client)
            with self.assertRaises(GatewayError) as caught:
                client.session("s").call(0, "t", {})
            self.assertIs(type(caught.exception), expected, answer)
        self.assertTrue(issubclass(toolgateway.ApprovalDeniedError, toolgateway.DeniedError))
        self.assertTrue(issubclass(toolgateway.IdentityError, InvalidInputError))


class BadInputTest(ClientTestCase):
    """Every bad input fails before a request is sent: the server sees none."""

    def test_bad_calls_send_nothing(self):
        server = self.serve(OK)
        client = Client(server.url)
        session = client.session("run-1")

        class Opaque:
            pass

        calls = {
            "set argument": lambda: session.call(0, "t", {"tags": {"a", "b"}}),
            "object argument": lambda: session.call(0, "t", {"x": Opaque()}),
            "Decimal argument": lambda: session.call(0, "t", {"amount": decimal.Decimal("9.99")}),
            "NaN": lambda: session.call(0, "t", {"x": math.nan}),
            "Infinity": lambda: session.call(0, "t", {"x": -math.inf}),
            "huge int": lambda: session.call(0, "t", {"id": 2**64}),
            "lone surrogate": lambda: session.call(0, "t", {"s": "\udc00"}),
            "args not an object": lambda: session.call(0, "t", ["a"]),
            "invalid JSON text": lambda: session.call(0, "t", b'{"a":1,"a":2}'),
            "negative step": lambda: session.call(-1, "t", {}),
            "fractional step": lambda: session.call(1.5, "t", {}),
            "float step": lambda: session.call(2.0, "t", {}),
            "bool step": lambda: session.call(True, "t", {}),
            "step beyond 2^53-1": lambda: session.call(2**53, "t", {}),
            "bad tool name": lambda: session.call(0, "Bad Tool", {}),
            "session id with colon": lambda: client.session("run:1").call(0, "t", {}),
            "empty session id": lambda: client.session("").call(0, "t", {}),
        }
        for name, call in calls.items():
            with self.subTest(name):
                with self.assertRaises(InvalidInputError) as caught:
                    call()
                self.assertTrue(str(caught.exception).startswith("toolgateway: "), str(caught.exception))
        self.assertEqual(server.requests, [], "a request reached the server")

    def test_messages_say_what_to_do(self):
        with self.assertRaisesRegex(InvalidInputError, "send such ids as strings"):
            toolgateway.derive_key("s", 0, "t", {"order_id": 12345678901234567890})
        with self.assertRaisesRegex(InvalidInputError, r"contains ':'"):
            toolgateway.validate_session_id("thread:1")
        with self.assertRaisesRegex(InvalidInputError, "at /items/1/price"):
            toolgateway.canonicalize({"items": [{}, {"price": math.nan}]})

    def test_bad_clients_are_refused_at_once(self):
        for url in ("", "localhost:8080", "ftp://gw", "http://", "http://gw:port", "http://gw/?q=1", "http://g w", 42):
            with self.subTest(url=url):
                self.assertRaises(InvalidInputError, Client, url)
        self.assertRaises(InvalidInputError, Client, "http://gw", token="a\r\nInjected: 1")
        self.assertRaises(InvalidInputError, Client, "http://gw", timeout=0)
        self.assertRaises(InvalidInputError, Client, "http://gw", max_attempts=0)
        self.assertEqual(Client("https://gw.example:8443/base/").base_url, "https://gw.example:8443/base")


class AsyncClientTest(ClientTestCase):
    def test_retries_with_the_same_key_and_honours_retry_after(self):
        server = self.serve(DROP, problem(409, "request_in_progress", {"Retry-After": "2"}),
                            problem(503, "store_unavailable"), OK)
        client = toolgateway.AsyncClient(server.url, token="t", initial_backoff=0.01, max_backoff=0.04)
        sleeps = []

        async def record(delay):
            sleeps.append(delay)

        client._sleep = record
        result = asyncio.run(client.session("run-1").call(3, "t", {"n": 1}))
        self.assertEqual((result.status, result.attempts, len(server.requests)), (200, 4, 4))
        self.assertEqual({r["headers"]["Idempotency-Key"] for r in server.requests}, {result.key})
        self.assertEqual(sleeps[1], 2.0)
        self.assertTrue(0.005 <= sleeps[0] <= 0.01 and 0.02 <= sleeps[2] <= 0.04, sleeps)

    def test_final_answers_and_bad_input(self):
        server = self.serve(problem(422, "step_conflict", tool="x", execution_id="01E"))
        client = toolgateway.AsyncClient(server.url)
        with self.assertRaises(GatewayError) as caught:
            asyncio.run(client.session("s").call(0, "t", {}))
        self.assertEqual((caught.exception.code, len(server.requests)), ("step_conflict", 1))
        with self.assertRaises(InvalidInputError):
            asyncio.run(client.session("s").call(-1, "t", {}))
        with self.assertRaises(InvalidInputError):
            asyncio.run(client.session("s").call(0, "t", {"x": math.nan}))
        self.assertRaises(InvalidInputError, client.session, "a:b")
        self.assertEqual(len(server.requests), 1)

    def test_bound_against_a_closed_port(self):
        client = toolgateway.AsyncClient("http://127.0.0.1:%d" % closed_port(), max_attempts=3,
                                         initial_backoff=0.01, max_backoff=0.02)
        with self.assertRaises(GatewayConnectionError) as caught:
            asyncio.run(client.session("s").call(0, "t", {}))
        self.assertEqual(caught.exception.attempts, 3)


if __name__ == "__main__":
    unittest.main()
