"""A rule method says which subject it answers where it is declared (`shared.bus.answers`), and the runtime
serves every marked method of the objects it is given (`ServiceRuntime.serve_rules`), through `serve`."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.bus import HANDLER_CONCURRENCY, RequestContext, answers, described_endpoints, rules_of
from shared.contracts import artifact, publication
from shared.contracts.common import Actor, CheckReply, CheckRequest
from shared.runtime import ServiceRuntime
from shared.settings import ArtifactSettings


class ArtifactChecks:
    def __init__(self) -> None:
        self.asked: list[tuple[str, RequestContext, CheckRequest]] = []

    @answers(artifact.CHECK)
    async def artifacts(self, ctx: RequestContext, req: CheckRequest) -> CheckReply:
        self.asked.append(("artifacts", ctx, req))
        return CheckReply(items=[])

    async def unmarked(self, ctx: RequestContext, req: CheckRequest) -> CheckReply:
        raise AssertionError("a method no subject names is never served")


class AllChecks(ArtifactChecks):
    """A subclass answers what its base answers, and its own subjects."""

    @answers(publication.CHECK)
    async def publications(self, ctx: RequestContext, req: CheckRequest) -> CheckReply:
        self.asked.append(("publications", ctx, req))
        return CheckReply(items=[])


def new_runtime() -> ServiceRuntime:
    return ServiceRuntime("artifact", ArtifactSettings(), Path("migrations"))


async def test_each_marked_method_is_served_bound_to_its_object_in_the_service_queue() -> None:
    runtime, checks = new_runtime(), AllChecks()
    runtime.serve_rules(checks)
    specs = {spec.subject: spec for spec in described_endpoints(runtime.broker)}
    assert set(specs) == {artifact.CHECK, publication.CHECK}
    assert {(spec.queue, spec.concurrency) for spec in specs.values()} == {("artifact", HANDLER_CONCURRENCY)}
    ctx = RequestContext(actor=Actor(scope="s", principal="p"), grant=None, subject=publication.CHECK, issuer="gateway")
    request = CheckRequest(refs=[])
    assert await specs[publication.CHECK].handler(ctx, request) == CheckReply(items=[])
    assert checks.asked == [("publications", ctx, request)]


def test_an_object_without_marked_methods_answers_nothing() -> None:
    assert rules_of(object()) == []
    runtime = new_runtime()
    runtime.serve_rules(object())
    assert described_endpoints(runtime.broker) == []


def test_a_subject_answered_by_two_objects_is_refused() -> None:
    with pytest.raises(ValueError, match=r"dossier\.artifact\.check is answered twice"):
        new_runtime().serve_rules(ArtifactChecks(), AllChecks())


def test_a_method_answers_one_subject() -> None:
    with pytest.raises(TypeError, match=r"already answers dossier\.publication\.check"):

        class Twice:
            @answers(artifact.CHECK)
            @answers(publication.CHECK)
            async def check(self, ctx: RequestContext, req: CheckRequest) -> CheckReply:
                return CheckReply(items=[])
