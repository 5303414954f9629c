"""An asyncio variant of the client.

:class:`AsyncClient` takes the same arguments as :class:`~toolgateway.Client`
and behaves the same (same key on every retry, same retry rules and bounds,
answers read by the same code); ``await client.session(id).call(step, tool,
args)`` returns a :class:`~toolgateway.Result`.

Transport: with httpx installed (``pip install 'toolgateway[async]'``; every
runtime extra brings it) each attempt is an ``httpx.AsyncClient`` request on
the event loop, so a thousand calls in flight hold no thread each, and
cancelling a call aborts its attempt (the gateway deduplicates the attempt
that may have reached it, like any retry). Without httpx each attempt runs
in a worker thread (``asyncio.to_thread``: ``urllib`` blocks) and cancelling
stops the call between attempts. ``transport`` says which one is used
(``"httpx"`` or ``"thread"``). The waits between attempts are
``asyncio.sleep`` either way.
"""

import asyncio
import importlib.util
import weakref
from typing import Any, Awaitable, Callable, Optional, Union

from .client import Client, Result, _Call
from .errors import GatewayError
from .keys import validate_session_id

def _httpx_installed() -> bool:
    # Looked up, not imported: `import toolgateway` loads nothing beyond the
    # standard library; httpx is imported by the first client that uses it.
    return importlib.util.find_spec("httpx") is not None

__all__ = ["AsyncClient", "AsyncSession"]


class AsyncClient:
    """Calls tools on one gateway from asyncio code; see :class:`~toolgateway.Client`
    for the arguments and the retry rules.

    Args (beside :class:`~toolgateway.Client`'s):
        transport: ``"auto"`` (httpx when installed, else threads),
            ``"httpx"`` (raise ImportError without it) or ``"thread"``.

    Use ``async with AsyncClient(...)`` or ``await client.aclose()`` to close
    httpx's connections; the client opens one connection pool per event loop
    it is used from.

    Raises:
        InvalidInputError: a malformed base URL or token, or bad numbers.
        ImportError: ``transport="httpx"`` without httpx installed.
    """

    def __init__(self, base_url: str, token: Any = None, timeout: float = 30.0, *,
                 transport: str = "auto", **options: Any) -> None:
        self._client = Client(base_url, token, timeout, **options)
        if transport not in ("auto", "httpx", "thread"):
            raise ValueError(f"toolgateway: transport must be 'auto', 'httpx' or 'thread', not {transport!r}")
        installed = transport != "thread" and _httpx_installed()
        if transport == "httpx" and not installed:
            raise ImportError("toolgateway: transport='httpx' needs httpx: pip install 'toolgateway[async]'")
        self.transport = "httpx" if installed else "thread"
        # One httpx pool per event loop: a pool is bound to the loop it
        # first ran on, and asyncio.run() makes a new loop each time.
        self._pools: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]" = weakref.WeakKeyDictionary()
        # Replaced in tests to record the delays without waiting them.
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    @property
    def base_url(self) -> str:
        """The gateway's root URL, without a trailing slash."""
        return self._client.base_url

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool of the running event loop."""
        pool = self._pools.pop(asyncio.get_running_loop(), None)
        if pool is not None:
            await pool.aclose()

    def _pool(self) -> Any:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            # No redirects (a redirect would resend or turn the POST into a
            # GET), no proxy from the environment beyond httpx's default
            # handling, the client's per-attempt timeout.
            import httpx
            pool = httpx.AsyncClient(timeout=self._client.timeout, follow_redirects=False)
            self._pools[loop] = pool
        return pool

    async def _attempt(self, call: _Call, attempt: int) -> Union[Result, GatewayError, Exception]:
        """One request: a Result, a GatewayError, or the transport error."""
        if self.transport == "thread":
            return await asyncio.to_thread(self._client._attempt, call, attempt)
        import httpx
        try:
            response = await self._pool().post(call.url, content=call.body, headers=call.headers)
        except httpx.TransportError as err:  # connect, read, write, timeout, protocol
            return err
        return self._client._answer(call, attempt, response.status_code, response.headers, response.content)

    async def approve(self, approval_id: str, note: Optional[str] = None, *, token: Optional[str] = None) -> None:
        """:meth:`toolgateway.Client.approve`, awaited."""
        call = self._client._decision_call(approval_id, "approve", note, token)
        self._client._decision_outcome(call, await self._attempt(call, 1))

    async def deny(self, approval_id: str, note: Optional[str] = None, *, token: Optional[str] = None) -> None:
        """:meth:`toolgateway.Client.deny`, awaited."""
        call = self._client._decision_call(approval_id, "deny", note, token)
        self._client._decision_outcome(call, await self._attempt(call, 1))

    def session(self, session_id: str) -> "AsyncSession":
        """A handle for the agent run ``session_id`` (checked now).

        Raises:
            InvalidInputError: the id breaks the rules.
        """
        return AsyncSession(self, validate_session_id(session_id))


class AsyncSession:
    """One agent run, for asyncio code. Get it from :meth:`AsyncClient.session`."""

    __slots__ = ("client", "id")

    def __init__(self, client: AsyncClient, session_id: str) -> None:
        self.client = client
        self.id = session_id

    async def call(self, step: int, tool: str, args: Any) -> Result:
        """Run ``tool`` with ``args`` as step ``step``; the same contract as
        :meth:`toolgateway.Session.call`, awaited."""
        sync = self.client._client
        call = sync._prepare(self.id, step, tool, args)  # raises before anything is sent
        started = sync._clock()
        attempt = 0
        while True:
            attempt += 1
            outcome = await self.client._attempt(call, attempt)
            if isinstance(outcome, Result):
                return outcome
            await self.client._sleep(sync._next_wait(call, outcome, attempt, started))

    async def approve(self, approval_id: str, note: Optional[str] = None, *, token: Optional[str] = None) -> None:
        """:meth:`AsyncClient.approve` through this session's client."""
        await self.client.approve(approval_id, note, token=token)

    async def deny(self, approval_id: str, note: Optional[str] = None, *, token: Optional[str] = None) -> None:
        """:meth:`AsyncClient.deny` through this session's client."""
        await self.client.deny(approval_id, note, token=token)
