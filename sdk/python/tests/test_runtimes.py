"""The step-index recipes on histories in the documented shapes, and on
configs and histories recorded from real LangGraph.js runs.

The histories below are written in the shapes the runtimes document (LangGraph
message lists, OpenAI Agents SDK session items, Temporal history events); the
runtimes themselves run in tests/runtimes (pytest, one venv per runtime).
The LangGraph cases of sdk/testdata/runtimes.json marked ``"recorded":
"langgraph"`` are what real LangGraph.js runs gave a tool (written by
sdk/typescript/test/record-langgraph.ts); LangGraph for Python has the same
shapes (``thread_id``/``checkpoint_ns`` in the configurable, LangChain's
serialised messages), so these recipes are tested on them too.
"""

import json
import os
import types
import unittest

from _support import REPO_ROOT

from toolgateway import InvalidInputError, derive_key, validate_session_id
from toolgateway.runtimes import (langgraph_identity, langgraph_session_id, langgraph_step,
                                  openai_agents_session_id, openai_agents_step, session_id_from_parts,
                                  temporal_session_id, temporal_step)

# A LangGraph thread: one call, then a turn with two parallel calls, then a
# final answer (LangChain's message dicts).
LANGGRAPH_MESSAGES = [
    {"type": "human", "content": "Provision a database and a cache in eu-west-1"},
    {"type": "ai", "content": "", "tool_calls": [
        {"name": "lookup-resource", "args": {"resource_id": "res_1"}, "id": "call_A", "type": "tool_call"}]},
    {"type": "tool", "content": "{...}", "tool_call_id": "call_A"},
    {"type": "ai", "content": "", "tool_calls": [
        {"name": "provision-infra", "args": {"name": "db", "region": "eu-west-1", "cpus": 2}, "id": "call_B", "type": "tool_call"},
        {"name": "provision-infra", "args": {"name": "cache", "region": "eu-west-1", "cpus": 1}, "id": "call_C", "type": "tool_call"}]},
]


class LangGraphTest(unittest.TestCase):
    def test_ordinal_of_the_tool_call_in_the_thread(self):
        self.assertEqual([langgraph_step(LANGGRAPH_MESSAGES, i) for i in ("call_A", "call_B", "call_C")], [0, 1, 2])

    def test_a_regenerated_turn_with_new_ids_keeps_the_indices(self):
        # The model turn is regenerated after a crash: new tool-call ids, the
        # same calls in the same order -> the same steps, the same keys.
        regenerated = LANGGRAPH_MESSAGES[:3] + [{"type": "ai", "tool_calls": [
            dict(call, id="call_X" + call["id"]) for call in LANGGRAPH_MESSAGES[3]["tool_calls"]]}]
        for old, new in (("call_B", "call_Xcall_B"), ("call_C", "call_Xcall_C")):
            self.assertEqual(langgraph_step(LANGGRAPH_MESSAGES, old), langgraph_step(regenerated, new))

    def test_message_objects_and_openai_style_dicts(self):
        ai = types.SimpleNamespace(type="ai", tool_calls=[{"id": "c1", "name": "a", "args": {}},
                                                         {"id": "c2", "name": "b", "args": {}}])
        human = types.SimpleNamespace(type="human", content="hi")
        self.assertEqual(langgraph_step([human, ai], "c2"), 1)
        openai_style = [{"role": "assistant", "tool_calls": [{"id": "x", "type": "function", "function": {"name": "a"}}]},
                        {"role": "tool", "tool_call_id": "x"},
                        {"role": "assistant", "tool_calls": [{"id": "y", "type": "function", "function": {"name": "b"}}]}]
        self.assertEqual(langgraph_step(openai_style, "y"), 1)

    def test_identity_from_the_config(self):
        config = {"configurable": {"thread_id": "user-7:thread-3", "checkpoint_ns": "tools:9a2b7c6d-1e2f-5a3b-9c4d-5e6f7a8b9c0d"}}
        session, step = langgraph_identity(config, LANGGRAPH_MESSAGES, "call_C")
        self.assertEqual((session, step), ("user-7%3Athread-3", 2))
        self.assertEqual(len(derive_key(session, step, "provision-infra", LANGGRAPH_MESSAGES[3]["tool_calls"][1]["args"])), 64)
        sub = langgraph_session_id("user-7:thread-3", "research:6f1c0e4a|tools:9a2b7c6d")
        self.assertEqual(sub, "user-7%3Athread-3/research")
        self.assertNotEqual(sub, session)

    def test_the_task_ids_of_the_namespace_do_not_count(self):
        # Each run of a tools node is a new task with a new id in its
        # namespace (a fork regenerating a turn gets a new one): the session
        # is the thread's all the same.
        first = langgraph_session_id("thread-1", "tools:11111111-1111-5111-8111-111111111111")
        again = langgraph_session_id("thread-1", "tools:22222222-2222-5222-8222-222222222222")
        self.assertEqual(first, again)
        self.assertEqual(first, "thread-1")

    def test_recorded_runs_a_fork_gets_the_same_identity(self):
        with open(os.path.join(REPO_ROOT, "sdk", "testdata", "runtimes.json"), encoding="utf-8") as f:
            fixture = json.load(f)
        recorded = {c["args"][2]: c for c in fixture["cases"]
                    if c.get("recorded") == "langgraph" and c["fn"] == "langgraph_identity"
                    and c["args"][0]["configurable"]["thread_id"] == "user-7:thread-3"}
        identity = {}
        for call_id, case in recorded.items():
            config, history = case["args"][0], fixture["histories"][case["args"][1]["$history"]]
            self.assertRegex(config["configurable"]["checkpoint_ns"], r"^tools:[0-9a-f-]{36}$")
            identity[call_id] = langgraph_identity(config, history, call_id)
        # The regenerated turn ran its tools under another task id, and its
        # calls got new ids: the same session and steps as the original turn.
        self.assertNotEqual(recorded["call_B"]["args"][0], recorded["call_B_regenerated"]["args"][0])
        self.assertEqual(identity["call_B"], identity["call_B_regenerated"])
        self.assertEqual(identity["call_C"], identity["call_C_regenerated"])
        self.assertEqual(sorted(step for _, step in identity.values()), [0, 1, 1, 2, 2])

    def test_missing_call_or_thread(self):
        self.assertRaises(InvalidInputError, langgraph_step, LANGGRAPH_MESSAGES, "call_Z")
        self.assertRaises(InvalidInputError, langgraph_identity, {"configurable": {}}, LANGGRAPH_MESSAGES, "call_A")
        self.assertRaises(InvalidInputError, langgraph_session_id, "t", ":1|tools:2")


# OpenAI Agents SDK session items (Responses API input items), as
# session.get_items() returns them, then the current run's new items.
AGENTS_ITEMS = [
    {"role": "user", "content": "Provision a database"},
    {"type": "function_call", "call_id": "call_1", "name": "lookup-resource", "arguments": "{\"resource_id\":\"res_1\"}", "id": "fc_1", "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "{...}"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "call_id": "call_2", "name": "provision-infra", "arguments": "{\"name\":\"db\"}", "id": "fc_2", "status": "completed"},
    {"type": "function_call", "call_id": "call_3", "name": "provision-infra", "arguments": "{\"name\":\"cache\"}", "id": "fc_3", "status": "completed"},
]


class OpenAIAgentsTest(unittest.TestCase):
    def test_ordinal_among_function_calls(self):
        self.assertEqual([openai_agents_step(AGENTS_ITEMS, c) for c in ("call_1", "call_2", "call_3")], [0, 1, 2])

    def test_object_items_and_regenerated_ids(self):
        objects = [types.SimpleNamespace(**item) for item in AGENTS_ITEMS]
        self.assertEqual(openai_agents_step(objects, "call_3"), 2)
        regenerated = AGENTS_ITEMS[:4] + [dict(i, call_id=i["call_id"] + "-new") for i in AGENTS_ITEMS[4:]]
        self.assertEqual(openai_agents_step(regenerated, "call_3-new"), openai_agents_step(AGENTS_ITEMS, "call_3"))

    def test_session_id_and_missing_call(self):
        self.assertEqual(openai_agents_session_id("user_123"), "user_123")
        self.assertEqual(openai_agents_session_id("conv:42 a"), "conv%3A42%20a")
        self.assertRaises(InvalidInputError, openai_agents_step, AGENTS_ITEMS, "call_9")
        self.assertRaises(InvalidInputError, openai_agents_step, AGENTS_ITEMS, "")


# Temporal history events, in the JSON shape of `temporal workflow show --output json`.
TEMPORAL_HISTORY = [
    {"eventId": "1", "eventType": "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED", "workflowExecutionStartedEventAttributes": {}},
    {"eventId": "5", "eventType": "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
     "activityTaskScheduledEventAttributes": {"activityId": "1", "activityType": {"name": "lookup"}}},
    {"eventId": "6", "eventType": "EVENT_TYPE_ACTIVITY_TASK_STARTED", "activityTaskStartedEventAttributes": {"attempt": 3}},
    {"eventId": "11", "eventType": "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
     "activityTaskScheduledEventAttributes": {"activityId": "charge-order-77", "activityType": {"name": "charge"}}},
    {"eventId": "12", "eventType": "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
     "activityTaskScheduledEventAttributes": {"activityId": "3", "activityType": {"name": "provision"}}},
]


class TemporalTest(unittest.TestCase):
    def test_default_activity_ids_are_sequence_numbers(self):
        self.assertEqual([temporal_step(a) for a in ("1", "2", "17")], [1, 2, 17])
        for bad in ("", "01", "-1", "x1", "charge-order-77", "\u0661", "1" * 17):
            with self.subTest(bad=bad):
                self.assertRaises(InvalidInputError, temporal_step, bad)

    def test_history_ordinal_for_any_activity_id(self):
        self.assertEqual([temporal_step(a, TEMPORAL_HISTORY) for a in ("1", "charge-order-77", "3")], [0, 1, 2])
        self.assertRaises(InvalidInputError, temporal_step, "4", TEMPORAL_HISTORY)

    def test_session_ids(self):
        self.assertEqual(temporal_session_id("order-77"), "order-77")
        self.assertEqual(temporal_session_id("order:77", "0190a1b2-run"), "order%3A77/0190a1b2-run")


class SessionIdPartsTest(unittest.TestCase):
    def test_valid_and_injective(self):
        samples = [("a",), ("a/b",), ("a", "b"), ("a:b",), ("a%3Ab",), ("caf\u00e9 \U0001F600",), ("x" * 300,)]
        ids = [session_id_from_parts(*parts) for parts in samples]
        for session_id in ids:
            validate_session_id(session_id)
        self.assertEqual(len(set(ids)), len(ids))
        self.assertTrue(ids[-1].startswith("sha256-"))
        self.assertRaises(InvalidInputError, session_id_from_parts)
        self.assertRaises(InvalidInputError, session_id_from_parts, "")


class SharedCasesTest(unittest.TestCase):
    """sdk/testdata/runtimes.json: the cases the TypeScript SDK's tests run
    too (test/runtimes.test.ts), so both SDKs give the same session ids and
    step indices for the same inputs."""

    FUNCTIONS = {f.__name__: f for f in (session_id_from_parts, langgraph_session_id, langgraph_step, langgraph_identity,
                                         openai_agents_session_id, openai_agents_step, temporal_session_id, temporal_step)}

    def test_every_case_gives_the_recorded_result(self):
        with open(os.path.join(REPO_ROOT, "sdk", "testdata", "runtimes.json"), encoding="utf-8") as f:
            fixture = json.load(f)
        cases = fixture["cases"]
        self.assertGreaterEqual(len(cases), 50)
        self.assertEqual({c["fn"] for c in cases}, set(self.FUNCTIONS), "every helper has cases")

        def resolve(arg):
            if isinstance(arg, dict) and "$history" in arg:
                return fixture["histories"][arg["$history"]]
            return arg

        for case in cases:
            fn, args = self.FUNCTIONS[case["fn"]], [resolve(a) for a in case["args"]]
            with self.subTest(fn=case["fn"], args=json.dumps(case["args"])[:120]):
                if case.get("error"):
                    self.assertRaises(InvalidInputError, fn, *args)
                else:
                    got = fn(*args)
                    self.assertEqual(list(got) if isinstance(got, tuple) else got, case["want"])


if __name__ == "__main__":
    unittest.main()
