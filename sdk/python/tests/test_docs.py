"""Every ```python block of the docs that show the Python SDK is tested code.

Each block is compiled; every name it imports from ``toolgateway`` must
exist, every attribute it reads of such a name (``wire.CODE_STEP_CONFLICT``)
too, and every call of such a name must fit its signature (a renamed keyword
argument fails). The blocks that import nothing but ``toolgateway`` are run,
as a reader would paste them, against the real gateway binary (embedded
store in a temporary directory): twice, and the second run must be the
replay of the first. Blocks that import an agent runtime (LangChain,
LangGraph, the OpenAI Agents SDK, Temporal), which is not installed here,
are only compiled and checked as above: their runtime part is not tested.
The values a runnable block stands for (`token`, `checkpoint`, `gateway`,
`items`, ...) are given in `run_block`; any other free name fails it.
"""

import ast
import contextlib
import importlib
import inspect
import io
import os
import re
import shutil
import tempfile
import types
import unittest

from _support import REPO_ROOT, go_binary

import test_e2e
from toolgateway import Client, Result

DOCS = ["README.md", "docs/sdk-python.md", "docs/keys.md", "docs/mcp.md", "sdk/python/README.md"]

# The address the docs use for the gateway; the runnable blocks get the test gateway's instead.
DOC_GATEWAY_URL = "http://127.0.0.1:8080"


def python_blocks():
    """(doc, first line, code) of every ```python block of DOCS."""
    blocks = []
    for doc in DOCS:
        with open(os.path.join(REPO_ROOT, doc), encoding="utf-8") as f:
            text = f.read()
        for match in re.finditer(r"^```python\n(.*?)^```$", text, re.M | re.S):
            blocks.append((doc, text.count("\n", 0, match.start()) + 2, match.group(1)))
    return blocks


def toolgateway_names(tree):
    """The names a block binds by importing from toolgateway: name -> object."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "toolgateway":
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):
                    raise AssertionError(f"{node.module} has no {alias.name} (line {node.lineno})")
                bound[alias.asname or alias.name] = getattr(module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "toolgateway":
                    continue
                module = importlib.import_module(alias.name)
                # "import toolgateway.x" binds toolgateway; "import toolgateway.x as y" binds y to x.
                bound[alias.asname] = module if alias.asname else importlib.import_module("toolgateway")
    return bound


def imported_modules(tree):
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            modules.add((node.module or "").split(".")[0])
        elif isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
    return modules


def check_uses(tree, bound):
    """Attribute reads and calls of the toolgateway names must fit them."""
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            obj, chain = resolve(node.value, bound)
            if obj is not None and not hasattr(obj, node.attr):
                problems.append(f"line {node.lineno}: {chain} has no attribute {node.attr}")
        elif isinstance(node, ast.Call):
            fn, chain = resolve(node.func, bound)
            if fn is None or not callable(fn):
                continue
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                continue
            try:
                inspect.signature(fn).bind(*[None] * len(node.args), **{k.arg: None for k in node.keywords})
            except TypeError as err:
                problems.append(f"line {node.lineno}: {chain}(...) does not fit its signature: {err}")
            except ValueError:
                pass  # no signature to check (a builtin)
    return problems


def resolve(node, bound):
    """The object a Name or a dotted Attribute of a toolgateway name stands for."""
    if isinstance(node, ast.Name) and node.id in bound:
        return bound[node.id], node.id
    if isinstance(node, ast.Attribute):
        obj, chain = resolve(node.value, bound)
        if obj is not None and hasattr(obj, node.attr):
            return getattr(obj, node.attr), f"{chain}.{node.attr}"
    return None, ""


class DocSnippetsCompileTest(unittest.TestCase):
    def test_every_block_compiles_and_uses_the_real_api(self):
        blocks = python_blocks()
        # README, sdk-python.md, keys.md's three recipes, mcp.md's two, the package README.
        self.assertGreaterEqual(len(blocks), 8, "python blocks found")
        for doc, line, code in blocks:
            with self.subTest(doc=doc, line=line):
                name = f"{doc}:{line}"
                # Top-level await: mcp.md's adapter example runs in an event loop.
                compile(code, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
                tree = ast.parse(code, name)
                bound = toolgateway_names(tree)
                self.assertEqual(check_uses(tree, bound), [], name)

    def test_the_check_catches_a_wrong_snippet(self):
        wrong = {
            "from toolgateway import Clientt": "no Clientt",
            "from toolgateway.runtimes import temporal_step_index": "no temporal_step_index",
            "from toolgateway import wire\nwire.CODE_STEP_CONFLICTS": "no attribute",
            "from toolgateway import Client\nClient('http://x', tokens='t')": "signature",
            "from toolgateway.runtimes import langgraph_identity\nlanggraph_identity({}, [])": "signature",
        }
        for code, why in wrong.items():
            with self.subTest(code=code):
                tree = ast.parse(code)
                try:
                    problems = check_uses(tree, toolgateway_names(tree))
                except AssertionError:
                    continue
                self.assertNotEqual(problems, [], why)


class DocSnippetsRunTest(unittest.TestCase):
    """The self-contained blocks, run against the real gateway."""

    @classmethod
    def setUpClass(cls):
        binary = go_binary("./cmd/gateway")
        cls.dir = tempfile.mkdtemp(prefix="toolgateway-py-docs-")
        config = os.path.join(cls.dir, "gateway.yaml")
        with open(config, "w") as f:
            # No auth section: the snippets' token is sent and not checked.
            f.write("listen: 127.0.0.1:0\nlog_level: info\nstore:\n  path: store/gateway.db\n")
        cls.gateway = test_e2e.Gateway(binary, config)

    @classmethod
    def tearDownClass(cls):
        cls.gateway.kill()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def run_block(self, name, code, session_id):
        namespace = {
            "__name__": "__doc_snippet__",
            # The values the snippets stand for: the agent's token and
            # checkpoint, its gateway client, the call at hand and its
            # runtime's history (OpenAI Agents SDK items, in the recorded
            # shape of test_runtimes.py).
            "token": "docs-token",
            "checkpoint": types.SimpleNamespace(session_id=session_id, step=0),
            "gateway": Client(self.gateway.url, token="docs-token"),
            "session_id": session_id + ":agents",
            "items": [{"role": "user", "content": "Provision a database"},
                      {"type": "function_call", "call_id": "call_1", "name": "provision-infra", "arguments": "{}"}],
            "call_id": "call_1",
            "args": {"name": "db", "region": "eu-west-1", "cpus": 2},
        }
        source = code.replace(DOC_GATEWAY_URL, self.gateway.url)
        with contextlib.redirect_stdout(io.StringIO()) as out:
            exec(compile(source, name, "exec"), namespace)
        results = [v for v in namespace.values() if isinstance(v, Result)]
        self.assertEqual(len(results), 1, f"{name}: the snippet should leave one Result")
        if "print(" in code:
            self.assertIn(str(results[0].status), out.getvalue(), f"{name}: it prints the status")
        return results[0]

    def test_self_contained_blocks_run_and_replay(self):
        runnable = [(doc, line, code) for doc, line, code in python_blocks()
                    if imported_modules(ast.parse(code)) == {"toolgateway"}]
        # The README's, sdk-python.md's and the package README's ten lines,
        # keys.md's OpenAI Agents SDK recipe.
        self.assertGreaterEqual(len(runnable), 4, "runnable python blocks found")
        for i, (doc, line, code) in enumerate(runnable):
            name = f"{doc}:{line}"
            with self.subTest(doc=doc, line=line):
                first = self.run_block(name, code, f"docs-snippet-{i}")
                self.assertEqual((first.status, first.replayed), (201, False), name)
                # The agent crashes and runs the same code again: a replay.
                again = self.run_block(name, code, f"docs-snippet-{i}")
                self.assertEqual((again.status, again.replayed, again.execution_id, again.body),
                                 (201, True, first.execution_id, first.body), name)


if __name__ == "__main__":
    unittest.main()
