"""The async client on httpx (toolgateway.aio, transport "httpx") against the
real gateway binary: many calls in flight park no thread, a duplicate of a
call in flight is retried (409 request_in_progress) until it replays, a
gateway killed and restarted mid-call is retried through, and a caller
approval is decided from the async client. Executions counted at the
upstream."""

import asyncio
import threading

import pytest

from toolgateway import wire, ApprovalPendingError, AsyncClient, GatewayError

pytest.importorskip("httpx")


def test_calls_in_flight_hold_no_thread(upstream, gateway_factory):
    gateway = gateway_factory([{"name": "slow"}], upstream=upstream)
    client = AsyncClient(gateway.url, token=gateway.token, transport="httpx")
    assert client.transport == "httpx"
    upstream.hold("slow")

    async def main():
        session = client.session("aio-threads")
        tasks = [asyncio.create_task(session.call(i, "slow", {"i": i})) for i in range(40)]
        # The upstream holds 40 requests: all 40 calls are in flight.
        while upstream.count("slow") < 40:
            await asyncio.sleep(0.02)
        # The threads asyncio runs blocking work on (to_thread, the default
        # executor) are named asyncio_N; the upstream's own are not.
        workers = [t for t in threading.enumerate() if t.name.startswith("asyncio_")]
        upstream.release("slow")
        results = await asyncio.gather(*tasks)
        await client.aclose()
        return workers, results

    workers, results = asyncio.run(main())
    assert workers == []
    assert sorted(r.json()["args"]["i"] for r in results) == list(range(40))
    assert upstream.count("slow") == 40


def test_duplicate_in_flight_and_gateway_restart_are_retried(upstream, gateway_factory):
    gateway = gateway_factory([{"name": "pay"}], upstream=upstream)
    # prefer_wait 0: the duplicate gets 409 request_in_progress and retries.
    client = AsyncClient(gateway.url, token=gateway.token, prefer_wait=0, initial_backoff=0.05,
                         max_backoff=0.2, max_attempts=200, max_elapsed=60)
    upstream.hold("pay")
    waits = []

    async def recorded_sleep(seconds):
        # The client waits between attempts: an attempt was answered with
        # something retryable (409 request_in_progress, or no answer).
        waits.append(seconds)
        await asyncio.sleep(seconds)
    client._sleep = recorded_sleep

    async def retried():
        while not waits:
            await asyncio.sleep(0.02)

    async def main():
        session = client.session("aio-dup")
        first = asyncio.create_task(session.call(0, "pay", {"amount": 5}))
        await asyncio.to_thread(upstream.wait_arrived, "pay", 1)
        second = asyncio.create_task(session.call(0, "pay", {"amount": 5}))
        await retried()  # the duplicate got its 409 and waits to retry
        upstream.release("pay")
        return await asyncio.gather(first, second)

    first, second = asyncio.run(main())
    assert (first.replayed, second.replayed, second.execution_id) == (False, True, first.execution_id)
    assert second.attempts > 1
    assert upstream.count("pay") == 1

    # The gateway dies; a call started meanwhile is retried until it is back.
    gateway.kill()

    async def during_outage():
        waits.clear()
        call = asyncio.create_task(client.session("aio-dup").call(0, "pay", {"amount": 5}))
        await retried()  # the first attempt found no gateway
        await asyncio.to_thread(gateway.restart)
        return await call

    again = asyncio.run(during_outage())
    assert (again.replayed, again.execution_id) == (True, first.execution_id)
    assert again.attempts > 1
    assert upstream.count("pay") == 1


def test_caller_approval_from_the_async_client(upstream, gateway_factory):
    # approver: caller means a person: the agent's own token cannot decide
    # (403 not_an_approver, typed), and nothing runs however often it tries.
    gateway = gateway_factory([{"name": "refund", "decide": [
        {"decision": "approve", "approver": "caller", "reason": "the user says"}]}], upstream=upstream)
    client = AsyncClient(gateway.url, token=gateway.token, prefer_wait=0)

    async def main():
        session = client.session("aio-approve")
        with pytest.raises(ApprovalPendingError) as pending:
            await session.call(0, "refund", {"amount": 7})
        refusals = []
        for _ in range(3):
            with pytest.raises(GatewayError) as refused:
                await session.approve(pending.value.approval_id, "I approve myself")
            refusals.append(refused.value.code)
            with pytest.raises(ApprovalPendingError):
                await session.call(0, "refund", {"amount": 7})
        return refusals

    assert asyncio.run(main()) == [wire.CODE_NOT_AN_APPROVER] * 3
    assert upstream.requests("refund") == []
