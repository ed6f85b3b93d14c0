"""The cyclic collector around a process's start (shared/gcfreeze.py): paused while a service imports and builds
its app, running again before the start waits for the stack or connects."""

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


def test_the_collector_is_paused_inside_and_given_back_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_is_given_back_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("an import failed")
    assert gc.isenabled()


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
