"""End to end against the real gateway binary (built with `go build` in the
test run), with the embedded store in a temporary directory: crash and replay
(of the agent, and of the gateway itself with kill -9), step conflicts,
schema errors, auth, a duplicate of a call in flight, and exotic arguments
whose key the gateway recomputes and accepts."""

import asyncio
import hashlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

from _support import go_binary

from toolgateway import AsyncClient, Client, GatewayError, canonicalize

TOKEN = "py-e2e-token"


class Gateway:
    """One gateway process on a free port, reading config_path."""

    def __init__(self, binary: str, config_path: str) -> None:
        self.proc = subprocess.Popen([binary, "-config", config_path], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.log: list = []
        listening: "queue.Queue[str]" = queue.Queue()

        def read_log() -> None:
            # Reads the whole log, so the pipe never fills up.
            for line in self.proc.stdout:
                self.log.append(line)
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("msg") == "gateway listening":
                    listening.put(entry["addr"])

        self.reader = threading.Thread(target=read_log, daemon=True)
        self.reader.start()
        try:
            self.url = "http://" + listening.get(timeout=60)
        except queue.Empty:
            self.kill()
            raise AssertionError("gateway did not report listening within 60 s:\n" + "".join(self.log)) from None

    def kill(self) -> None:
        """SIGKILL: the crash of a gateway process."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.reader.join(timeout=10)
        self.proc.stdout.close()


class EndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = go_binary("./cmd/gateway")
        cls.dir = tempfile.mkdtemp(prefix="toolgateway-py-e2e-")
        cls.config = os.path.join(cls.dir, "gateway.yaml")
        with open(cls.config, "w") as f:
            f.write("listen: 127.0.0.1:0\n"
                    "log_level: info\n"
                    "store:\n  path: store/gateway.db\n"
                    "auth:\n  tenants:\n    - name: py-e2e\n"
                    f"      token_sha256: {hashlib.sha256(TOKEN.encode()).hexdigest()}\n")
        cls.gateway = Gateway(cls.binary, cls.config)

    @classmethod
    def tearDownClass(cls):
        cls.gateway.kill()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def client(self) -> Client:
        return Client(self.gateway.url, token=TOKEN, initial_backoff=0.05, max_backoff=0.5)

    def test_crash_and_replay(self):
        args = {"name": "db", "region": "eu-west-1", "cpus": 2}
        first = self.client().session("run-42").call(4, "provision-infra", args)
        self.assertEqual((first.status, first.replayed), (201, False))
        self.assertTrue(first.execution_id)
        resource = first.json()["resource_id"]

        # The agent crashes before it records the result; its next process
        # restores session run-42 at step 4 (the same arguments, spelled otherwise).
        again = self.client().session("run-42").call(4, "provision-infra", b'{ "cpus": 2.0, "region": "eu-west-1", "name": "db" }')
        self.assertEqual((again.status, again.replayed, again.execution_id, again.body, again.key),
                         (201, True, first.execution_id, first.body, first.key))

        # The gateway itself is killed; a new process on the same store replays too.
        type(self).gateway.kill()
        type(self).gateway = Gateway(self.binary, self.config)
        after_restart = self.client().session("run-42").call(4, "provision-infra", args)
        self.assertEqual((after_restart.replayed, after_restart.execution_id, after_restart.json()["resource_id"]),
                         (True, first.execution_id, resource))

        # Another call in the same step is refused, naming the earlier call.
        with self.assertRaises(GatewayError) as caught:
            self.client().session("run-42").call(4, "provision-infra", {"name": "cache", "region": "eu-west-1", "cpus": 1})
        err = caught.exception
        self.assertEqual((err.status, err.code, err.retryable, err.attempts), (422, "step_conflict", False, 1))
        self.assertEqual((err.problem["tool"], err.problem["execution_id"]), ("provision-infra", first.execution_id))

    def test_invalid_arguments(self):
        with self.assertRaises(GatewayError) as caught:
            self.client().session("run-schema").call(0, "provision-infra", {"name": 7, "region": "eu-west-1", "cpus": 2})
        err = caught.exception
        self.assertEqual((err.status, err.code, err.attempts), (400, "invalid_arguments", 1))
        self.assertTrue(any(e["location"] == "/name" for e in err.problem["errors"]), err.problem)

    def test_unauthorized(self):
        with self.assertRaises(GatewayError) as caught:
            Client(self.gateway.url).session("run-auth").call(0, "echo", {})
        self.assertEqual((caught.exception.status, caught.exception.code, caught.exception.attempts),
                         (401, "unauthorized", 1))

    def test_gateway_derives_the_same_key_for_exotic_arguments(self):
        exotic = {"\U0001F600": [1e21, 1e-7, -0.0, 0.1 + 0.2, 5e-324, 2**53 - 1, 1.0],
                  "\ue000": "tab\tnul\x00 \u2028 \"q\" \\ </script>", "": {"b": None, "a": [True, False]},
                  "caf\u00e9": 1.7976931348623157e308}
        session = self.client().session("run-exotic")
        result = session.call(0, "echo", exotic)
        # echo answers the exact bytes it received: the canonical form, which
        # the gateway checked against the key the SDK derived.
        self.assertEqual((result.status, result.replayed, result.body), (200, False, canonicalize(exotic)))
        replay = session.call(0, "echo", exotic)
        self.assertEqual((replay.replayed, replay.execution_id), (True, result.execution_id))

    def test_duplicate_of_a_call_in_flight_gets_its_outcome(self):
        args = {"delay_ms": 1500, "n": 1}
        outcomes = {}

        def original():
            outcomes["original"] = self.client().session("run-slow").call(0, "echo", args)

        thread = threading.Thread(target=original)
        thread.start()
        time.sleep(0.4)
        duplicate = self.client().session("run-slow").call(0, "echo", args)
        thread.join(timeout=30)
        first = outcomes["original"]
        self.assertFalse(first.replayed)
        self.assertEqual((duplicate.replayed, duplicate.execution_id, duplicate.body),
                         (True, first.execution_id, first.body))

    def test_async_client_and_sync_client_share_the_record(self):
        args = {"text": "from asyncio"}
        client = AsyncClient(self.gateway.url, token=TOKEN)
        first = asyncio.run(client.session("run-async").call(0, "echo", args))
        again = self.client().session("run-async").call(0, "echo", args)
        self.assertEqual((first.replayed, again.replayed, again.execution_id, again.body),
                         (False, True, first.execution_id, first.body))


if __name__ == "__main__":
    unittest.main()
