"""pytest configuration of the runtime adapters' tests: puts the SDK's source
and the harness on sys.path and gives the harness as fixtures.

This directory has no ``__init__.py`` on purpose: ``python3 -m unittest
discover -s sdk/python/tests`` (standard library only) does not descend into
it, so the runtimes are never needed there."""

import os
import sys
from typing import Any, Callable, Iterator, List

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import AgentProcess, CountingUpstream, Gateway  # noqa: E402


@pytest.fixture
def upstream() -> Iterator[CountingUpstream]:
    """A fresh CountingUpstream for the test."""
    with CountingUpstream() as server:
        yield server


@pytest.fixture
def gateway_factory() -> Iterator[Callable[..., Gateway]]:
    """``gateway_factory(config_tools, upstream=..., store=...)`` starts a
    Gateway that is stopped at the end of the test."""
    started: List[Gateway] = []

    def start(*args: Any, **kwargs: Any) -> Gateway:
        gateway = Gateway(*args, **kwargs)
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        gateway.stop()


@pytest.fixture
def agents() -> Iterator[Callable[..., AgentProcess]]:
    """``agents(script, *args, env=...)`` spawns an AgentProcess that is
    killed (if still running) at the end of the test."""
    spawned: List[AgentProcess] = []

    def spawn(*args: Any, **kwargs: Any) -> AgentProcess:
        agent = AgentProcess(*args, **kwargs)
        spawned.append(agent)
        return agent

    yield spawn
    for agent in spawned:
        agent.kill9()


def pytest_collection_modifyitems(config: Any, items: List[Any]) -> None:
    """With ``TOOLGATEWAY_SKIP_WITHOUT=1`` (CI on the oldest versions) skip
    the "without the gateway" half of the fault scenarios (tests
    parametrized ``with_gateway=False``): it is recorded for the matrix,
    never asserted, and the newest versions run it."""
    if os.environ.get("TOOLGATEWAY_SKIP_WITHOUT") != "1":
        return
    skip = pytest.mark.skip(reason="the without-gateway half runs on the newest versions only")
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("with_gateway") is False:
            item.add_marker(skip)
