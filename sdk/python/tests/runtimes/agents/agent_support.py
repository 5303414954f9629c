"""What every agent script of tests/runtimes needs, on the standard library.

An agent runs its tools through the gateway when ``TOOLGATEWAY_URL`` is set
(the harness's ``Gateway.env()``), else straight against the counting
upstream at ``TOOLGATEWAY_UPSTREAM_URL`` ("without the gateway": the
runtime's own behaviour, for the matrix). ``marker(name)`` prints a line the
test waits for before a ``kill -9``.
"""

import json
import os
import sys
import urllib.request
from typing import Any, Optional


def marker(name: str, detail: Any = None) -> None:
    """Print ``name`` (and ``detail`` as JSON) on a line of its own, flushed."""
    line = name if detail is None else f"{name} {json.dumps(detail, sort_keys=True, default=str)}"
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def gateway_url() -> Optional[str]:
    """The gateway's URL, or None when the tools run without it."""
    return os.environ.get("TOOLGATEWAY_URL") or None


def gateway_token() -> Optional[str]:
    """The agent tenant's token, if the gateway requires one."""
    return os.environ.get("TOOLGATEWAY_TOKEN") or None


def direct_call(tool: str, args: Any, timeout: float = 120) -> Any:
    """Run ``tool`` without the gateway: POST the arguments to the upstream
    and return its decoded JSON answer (``timeout``: seconds to wait for it)."""
    base = os.environ["TOOLGATEWAY_UPSTREAM_URL"]
    request = urllib.request.Request(f"{base}/{tool}", data=json.dumps(args).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())
