"""The cyclic collector around a process's start (shared/gcfreeze.py): paused while a service imports and builds
its app, what that built frozen, and the collector running again before the start waits for the stack or
connects."""

from __future__ import annotations

import gc
import runpy
from collections.abc import Iterator
from typing import Any

import pytest

from shared.gcfreeze import collector_paused

SERVICES = ("artifact", "assets", "publication", "runhost", "workspace")


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()
    gc.unfreeze()  # what a test froze is this test run's, not a service's


def test_the_collector_is_paused_inside_and_given_back_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_is_given_back_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("an import failed")
    assert gc.isenabled()


def test_what_the_block_built_is_frozen_as_it_ends() -> None:
    before = gc.get_freeze_count()
    with collector_paused():
        built = [[index] for index in range(1000)]
        assert gc.get_freeze_count() == before
    assert gc.get_freeze_count() >= before + len(built)


def test_a_block_that_raises_freezes_nothing() -> None:
    before = gc.get_freeze_count()
    built: list[list[int]] = []
    with pytest.raises(RuntimeError), collector_paused():
        built.extend([index] for index in range(1000))
        raise RuntimeError("an import failed")
    assert len(built) == 1000 and gc.get_freeze_count() == before


def test_a_collector_paused_before_stays_paused() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


class Started(Exception):
    """Where the test stops a service's entry point: the start would wait for the stack from here."""


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_builds_its_app_paused_and_starts_with_the_collector(
    service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    import shared.runtime

    app = importlib.import_module(f"services.{service}.app")
    seen: dict[str, bool] = {}
    runtime = object()

    def create_app(settings: Any) -> object:
        seen["building"] = gc.isenabled()
        return runtime

    def run_service(given: object) -> None:
        assert given is runtime
        seen["starting"] = gc.isenabled()
        raise Started

    monkeypatch.setattr(app, "create_app", create_app)
    monkeypatch.setattr(shared.runtime, "run_service", run_service)
    with pytest.raises(Started):
        runpy.run_module(f"services.{service}", run_name="__main__")
    assert seen == {"building": False, "starting": True}


def test_the_gateway_builds_its_app_paused_and_waits_with_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    import services.gateway.app
    import shared.children
    import shared.observe
    import shared.tracing

    seen: dict[str, bool] = {}

    def create_app(settings: Any, **_: Any) -> object:
        seen["building"] = gc.isenabled()
        return object()

    def wait_for_file(path: Any) -> None:
        seen["waiting"] = gc.isenabled()
        raise Started

    monkeypatch.setenv("DOSSIER_GATEWAY_WORKERS", "1")
    monkeypatch.setattr(services.gateway.app, "create_app", create_app)
    monkeypatch.setattr(shared.children, "wait_for_file", wait_for_file)
    # The process's logging and tracing are its own: none of this test run's.
    monkeypatch.setattr(shared.observe, "configure_logging", lambda *_, **__: None)
    monkeypatch.setattr(shared.tracing, "setup_tracing", lambda *_, **__: None)
    with pytest.raises(Started):
        runpy.run_module("services.gateway", run_name="__main__")
    assert seen == {"building": False, "waiting": True}
