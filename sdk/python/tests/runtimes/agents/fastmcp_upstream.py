"""A FastMCP server: the gateway's MCP upstream (``mcp_servers``), or the
plain MCP server an app calls without the gateway.

Usage: ``python fastmcp_upstream.py EFFECT_URL stdio`` or
``python fastmcp_upstream.py EFFECT_URL http PORT``.

Its mutating tool ``refund`` acts by POSTing ``{"order", "amount", "meta"}``
to ``EFFECT_URL/refund`` — the test's CountingUpstream, which counts every
execution before answering and can hold it — with the ``_meta`` the server
received, so the tests count executions at the side effect (the stdio server
is the gateway's child process and dies with it; the counter does not) and
see what identity the gateway forwarded.
"""

import json
import sys
import urllib.request

import anyio
from fastmcp import Context, FastMCP

EFFECT_URL = sys.argv[1].rstrip("/")

server = FastMCP("refunds")


def _post(payload: dict) -> dict:
    request = urllib.request.Request(EFFECT_URL + "/refund", data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.loads(response.read())


@server.tool
async def refund(order: str, amount: int, ctx: Context) -> dict:
    """Refund an order (mutating: the gateway keys and records every call)."""
    meta = dict(ctx.request_context.meta or {}) if ctx.request_context is not None else {}
    # In a worker thread: a held effect must not block the server's other calls.
    effect = await anyio.to_thread.run_sync(_post, {"order": order, "amount": amount, "meta": meta})
    return {"refunded": order, "amount": amount, "execution": effect.get("execution")}


if __name__ == "__main__":
    if sys.argv[2] == "stdio":
        server.run(transport="stdio", show_banner=False)
    else:
        server.run(transport="http", host="127.0.0.1", port=int(sys.argv[3]), path="/mcp",
                   show_banner=False, log_level="warning")
