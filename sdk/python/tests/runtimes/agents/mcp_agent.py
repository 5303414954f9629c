"""An app that calls one MCP tool, with the official ``mcp`` SDK's
``ClientSession`` or FastMCP's ``Client``; the process test_mcp.py kills.

Usage::

    python mcp_agent.py CLIENT TARGET SESSION STEP TOOL ARGS_JSON [FLAGS]

CLIENT is ``mcp`` or ``fastmcp``. TARGET is ``gateway`` (the gateway's
``/mcp`` from ``TOOLGATEWAY_URL``/``TOOLGATEWAY_TOKEN``, the call made with
``toolgateway.mcp.call_tool`` and its identity) or the URL of a plain MCP
server (the same app without the gateway: ``call_tool`` of the client, no
identity). SESSION and STEP are the run's identity, as the app would keep
them in its own state.

Markers (one line each): ``CALLING``; ``RESULT {json}``;
``BEFORE-CHECKPOINT`` (``--stop-before-checkpoint``: the answer arrived, the
app has not saved it; the process then waits to be killed); ``APPROVAL-PENDING <id>`` (then it waits to be killed with
``--wait-when-paused``, else exits 3); ``GATEWAY-ERROR {json}`` (exit 4).
"""

import asyncio
import contextlib
import json
import os
import sys
from typing import Any, AsyncIterator, Optional

import httpx2

from toolgateway import ApprovalPendingError, GatewayError
from toolgateway.mcp import call_tool, execution_id, replayed


def _flag(name: str) -> bool:
    return name in sys.argv[7:]


@contextlib.asynccontextmanager
async def connect(kind: str, url: str, token: str = "") -> AsyncIterator[Any]:
    """A connected client of ``kind`` (``mcp``: ``mcp.ClientSession`` over
    Streamable HTTP; ``fastmcp``: ``fastmcp.Client``) to the MCP endpoint
    ``url``, with the bearer ``token`` if given."""
    if kind == "fastmcp":
        from fastmcp import Client
        async with Client(url, auth=token or None) as client:  # a string auth is a bearer token
            yield client
        return
    headers = {"Authorization": "Bearer " + token} if token else {}
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as client:
        await client.initialize()
        yield client


async def call(client: Any, through_gateway: bool, session_id: str, step: int, tool: str, args: dict,
               timeout: Optional[float] = None) -> Any:
    """The app's tool call: through the gateway with the identity
    (toolgateway.mcp.call_tool), or the client's own call to a plain server."""
    if through_gateway:
        return await call_tool(client, tool, args, session_id=session_id, step_index=step, timeout=timeout)
    if hasattr(client, "call_tool_mcp"):
        return await client.call_tool_mcp(tool, args, timeout=timeout)
    return await client.call_tool(tool, args, read_timeout_seconds=timeout)


def summary(result: Any) -> dict:
    """What the app got: replayed, execution_id, is_error, structured, text."""
    return {"replayed": replayed(result), "execution_id": execution_id(result), "is_error": bool(result.is_error),
            "structured": result.structured_content,
            "text": "".join(getattr(block, "text", "") for block in result.content)}


async def _run(client, through_gateway: bool, session_id: str, step: int, tool: str, args: dict) -> int:
    print("CALLING", flush=True)
    try:
        result = await call(client, through_gateway, session_id, step, tool, args)
    except ApprovalPendingError as pending:
        print("APPROVAL-PENDING", pending.approval_id, flush=True)
        if _flag("--wait-when-paused"):
            await asyncio.Event().wait()  # paused until killed
        return 3
    except GatewayError as error:
        print("GATEWAY-ERROR", json.dumps({"code": error.code, "retryable": error.retryable,
                                           "detail": error.detail}), flush=True)
        return 4
    print("RESULT", json.dumps(summary(result)), flush=True)
    if _flag("--stop-before-checkpoint"):
        print("BEFORE-CHECKPOINT", flush=True)
        await asyncio.Event().wait()  # killed before the app saves the answer
    return 0


async def main() -> int:
    kind, target, session_id, step, tool, args_json = sys.argv[1:7]
    through_gateway = target == "gateway"
    url = os.environ["TOOLGATEWAY_URL"] + "/mcp" if through_gateway else target
    token = os.environ.get("TOOLGATEWAY_TOKEN", "") if through_gateway else ""
    async with connect(kind, url, token) as client:
        return await _run(client, through_gateway, session_id, int(step), tool, json.loads(args_json))


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
