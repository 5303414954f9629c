"""An asyncio variant of the client, on the standard library.

:class:`AsyncClient` takes the same arguments as :class:`~toolgateway.Client`
and behaves the same (same key on every retry, same retry rules and bounds);
``await client.session(id).call(step, tool, args)`` returns a
:class:`~toolgateway.Result`. Each HTTP attempt runs in a worker thread
(``asyncio.to_thread``, as ``urllib`` blocks) and the waits between attempts
are ``asyncio.sleep``, so the event loop is never blocked. Cancelling the
call stops it between attempts; an attempt already sent runs to its end in
its thread (at most ``timeout`` seconds), and the gateway deduplicates it
like any other retry.
"""

import asyncio
from typing import Any, Awaitable, Callable, Optional

from .client import Client, Result
from .keys import validate_session_id

__all__ = ["AsyncClient", "AsyncSession"]


class AsyncClient:
    """Calls tools on one gateway from asyncio code; see :class:`~toolgateway.Client`
    for the arguments and the retry rules.

    Raises:
        InvalidInputError: a malformed base URL or token, or bad numbers.
    """

    def __init__(self, base_url: str, token: Any = None, timeout: float = 30.0, **options: Any) -> None:
        self._client = Client(base_url, token, timeout, **options)
        # Replaced in tests to record the delays without waiting them.
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    @property
    def base_url(self) -> str:
        """The gateway's root URL, without a trailing slash."""
        return self._client.base_url

    async def approve(self, approval_id: str, note: Optional[str] = None, *, token: Optional[str] = None) -> None:
        """:meth:`toolgateway.Client.approve`, awaited."""
        await asyncio.to_thread(self._client.approve, approval_id, note, token=token)

    async def deny(self, approval_id: str, note: Optional[str] = None, *, token: Optional[str] = None) -> None:
        """:meth:`toolgateway.Client.deny`, awaited."""
        await asyncio.to_thread(self._client.deny, approval_id, note, token=token)

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
            outcome = await asyncio.to_thread(sync._attempt, call, attempt)
            if isinstance(outcome, Result):
                return outcome
            await self.client._sleep(sync._next_wait(call, outcome, attempt, started))
