"""The publication service over real NATS and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from nacl.signing import SigningKey
from prometheus_client import REGISTRY

from services.publication.app import create_app
from shared.bus import BusClient
from shared.contracts import publication as c
from shared.contracts.common import Actor, Ref
from shared.errors import Conflict, DomainError, Invalid, NotFound, TooLarge, Unauthenticated, Unavailable
from shared.grants import GrantClaims, sign_grant
from shared.proof import load_private_key
from shared.settings import PublicationSettings
from tests.support.infra import Infra
from tests.support.service import running, settings_from


@pytest.fixture
async def publication(infra: Infra) -> AsyncIterator[PublicationSettings]:
    settings = settings_from(infra.settings_env("publication", DOSSIER_MAX_BODY_BYTES="4096"), PublicationSettings)
    async with running(create_app(settings)):
        yield settings


def actor(scope: str | None = None) -> Actor:
    return Actor(scope=scope or f"s{uuid.uuid4().hex[:8]}", principal="alice")


async def commit(bus: BusClient, who: Actor, body: str = "Fund X is liquid.", **extra: object) -> dict:
    return await bus.call_raw(c.COMMIT, {"title": "Report A", "body": body, **extra}, actor=who)


async def test_commit_then_read_exact_version(publication: PublicationSettings, bus: BusClient) -> None:
    who = actor()
    sources = [{"kind": "source", "id": "src_1", "version": 2}]
    v1 = await commit(bus, who, sources=sources, run_id="run_9")
    assert v1["version"] == 1 and v1["status"] == "active"
    assert v1["sources"] == sources and v1["run_id"] == "run_9"
    import hashlib

    assert v1["content_hash"] == hashlib.sha256(b"Fund X is liquid.").hexdigest()
    read = await bus.call_raw(c.READ, {"id": v1["id"], "version": 1}, actor=who)
    assert read == v1


async def test_revise_is_compare_and_swap(publication: PublicationSettings, bus: BusClient) -> None:
    who = actor()
    v1 = await commit(bus, who)
    v2 = await bus.call_raw(c.REVISE, {"id": v1["id"], "body": "v2", "expected_latest_version": 1}, actor=who)
    assert v2["version"] == 2 and v2["title"] == "Report A"
    with pytest.raises(Conflict) as err:
        await bus.call_raw(c.REVISE, {"id": v1["id"], "body": "lost", "expected_latest_version": 1}, actor=who)
    assert err.value.details == {"current_latest_version": 2}
    assert (await bus.call_raw(c.READ, {"id": v1["id"], "version": 1}, actor=who))["body"] == "Fund X is liquid."
    summary = await bus.call_raw(c.GET, {"id": v1["id"]}, actor=who)
    assert summary["latest_version"] == 2 and [v["version"] for v in summary["versions"]] == [1, 2]


async def test_concurrent_revisions_exactly_one_wins(publication: PublicationSettings, bus: BusClient) -> None:
    who = actor()
    v1 = await commit(bus, who)
    attempts = [
        bus.call_raw(c.REVISE, {"id": v1["id"], "body": f"v2-{i}", "expected_latest_version": 1}, actor=who)
        for i in range(10)
    ]
    results = await asyncio.gather(*attempts, return_exceptions=True)
    assert sum(1 for r in results if isinstance(r, dict)) == 1
    assert all(isinstance(r, Conflict) for r in results if not isinstance(r, dict))


async def test_withdrawn_version_is_unavailable(publication: PublicationSettings, bus: BusClient) -> None:
    who = actor()
    v1 = await commit(bus, who)
    out = await bus.call_raw(c.WITHDRAW, {"id": v1["id"], "version": 1, "reason": "wrong numbers"}, actor=who)
    assert out["status"] == "withdrawn"
    with pytest.raises(Unavailable) as err:
        await bus.call_raw(c.READ, {"id": v1["id"], "version": 1}, actor=who)
    assert err.value.details["reason"] == "withdrawn"
    again = await bus.call_raw(c.WITHDRAW, {"id": v1["id"], "version": 1, "reason": "twice"}, actor=who)
    assert again["status"] == "withdrawn"


def coalesced(subject: str) -> tuple[float, float]:
    """(statements, lookups) counted so far for `subject`'s coalesced reads in this process."""
    labels = {"lookup": subject}
    count = REGISTRY.get_sample_value("dossier_coalesced_lookups_count", labels) or 0.0
    return count, REGISTRY.get_sample_value("dossier_coalesced_lookups_sum", labels) or 0.0


async def test_reads_waiting_together_share_a_statement_and_each_gets_its_own_answer(
    publication: PublicationSettings, bus: BusClient
) -> None:
    owner, stranger = actor(), actor()
    v1 = await commit(bus, owner)
    await bus.call_raw(c.REVISE, {"id": v1["id"], "body": "v2", "expected_latest_version": 1}, actor=owner)
    await bus.call_raw(c.WITHDRAW, {"id": v1["id"], "version": 2, "reason": "wrong"}, actor=owner)
    expected: list[tuple[Actor, int, type[DomainError] | None]] = [
        (owner, 1, None),
        (owner, 2, Unavailable),
        (owner, 3, NotFound),
        (stranger, 1, NotFound),
    ] * 25
    statements, lookups = coalesced(c.READ)
    results = await asyncio.gather(
        *(bus.call_raw(c.READ, {"id": v1["id"], "version": n}, actor=who) for who, n, _ in expected),
        return_exceptions=True,
    )
    for (_, n, error), result in zip(expected, results, strict=True):
        if error is None:
            assert isinstance(result, dict) and result["version"] == n and result["body"] == "Fund X is liquid."
        else:
            assert type(result) is error, (n, result)
    statements, lookups = (a - b for a, b in zip(coalesced(c.READ), (statements, lookups), strict=True))
    assert lookups == len(expected) and statements < lookups


async def test_a_read_sent_after_a_withdrawal_never_answers_from_a_statement_sent_before_it(
    publication: PublicationSettings, bus: BusClient
) -> None:
    """Readers keep statements in flight the whole time, so the later reads queue behind one of them."""
    who = actor()
    v1 = await commit(bus, who)
    read = {"id": v1["id"], "version": 1}
    stop = asyncio.Event()

    async def keep_reading() -> None:
        while not stop.is_set():
            with contextlib.suppress(Unavailable):
                await bus.call_raw(c.READ, read, actor=who)

    readers = [asyncio.create_task(keep_reading()) for _ in range(16)]
    try:
        await asyncio.sleep(0.3)
        await bus.call_raw(c.WITHDRAW, {**read, "reason": "wrong"}, actor=who)
        after = await asyncio.gather(
            *(bus.call_raw(c.READ, read, actor=who) for _ in range(50)), return_exceptions=True
        )
    finally:
        stop.set()
        await asyncio.gather(*readers)
    assert all(isinstance(r, Unavailable) for r in after), [r for r in after if not isinstance(r, Unavailable)]


async def test_other_scope_sees_nothing(publication: PublicationSettings, bus: BusClient) -> None:
    owner, stranger = actor(), actor()
    v1 = await commit(bus, owner)
    for subject, data in [
        (c.GET, {"id": v1["id"]}),
        (c.READ, {"id": v1["id"], "version": 1}),
        (c.REVISE, {"id": v1["id"], "body": "x", "expected_latest_version": 1}),
        (c.WITHDRAW, {"id": v1["id"], "version": 1, "reason": "x"}),
    ]:
        with pytest.raises(NotFound):
            await bus.call_raw(subject, data, actor=stranger)
    check = await bus.call_raw(
        c.CHECK, {"refs": [{"kind": "publication", "id": v1["id"], "version": 1}]}, actor=stranger
    )
    assert check["items"][0]["available"] is False and check["items"][0]["reason"] == "not_found"


async def test_grant_read_checks_signature_expiry_scope_and_ref(
    publication: PublicationSettings, bus: BusClient, infra: Infra
) -> None:
    who = actor()
    v1 = await commit(bus, who)
    await bus.call_raw(c.REVISE, {"id": v1["id"], "body": "v2", "expected_latest_version": 1}, actor=who)
    ref_v1 = Ref(kind="publication", id=v1["id"], version=1).key()

    def grant(key: SigningKey = load_private_key(infra.proof_keys["runhost"]), **kw: object) -> str:
        values: dict[str, object] = {
            "run_id": "run_1",
            "scope": who.scope,
            "refs": [ref_v1],
            "expires_at": time.time() + 60,
        }
        values.update(kw)
        return sign_grant(key, GrantClaims.model_validate(values))

    read = await bus.call_raw(c.READ, {"id": v1["id"], "version": 1}, actor=who, grant=grant())
    assert read["version"] == 1
    with pytest.raises(NotFound):  # v2 exists, but this run was admitted with v1 only
        await bus.call_raw(c.READ, {"id": v1["id"], "version": 2}, actor=who, grant=grant())
    with pytest.raises(Unauthenticated):
        await bus.call_raw(c.READ, {"id": v1["id"], "version": 1}, actor=who, grant=grant(key=SigningKey.generate()))
    with pytest.raises(Unauthenticated):
        await bus.call_raw(c.READ, {"id": v1["id"], "version": 1}, actor=who, grant=grant(expires_at=time.time() - 1))
    with pytest.raises(NotFound):
        await bus.call_raw(c.READ, {"id": v1["id"], "version": 1}, actor=who, grant=grant(scope="elsewhere"))
    await bus.call_raw(c.WITHDRAW, {"id": v1["id"], "version": 1, "reason": "retracted"}, actor=who)
    with pytest.raises(Unavailable) as err:
        await bus.call_raw(c.READ, {"id": v1["id"], "version": 1}, actor=who, grant=grant())
    assert err.value.details["reason"] == "withdrawn"


async def test_a_runs_search_reaches_its_workspace_and_what_it_found_is_readable(
    publication: PublicationSettings, bus: BusClient, infra: Infra
) -> None:
    who = actor()
    memo = await commit(bus, who, body="The redemption gate was lifted in March.", workspace_id="ws_a")
    elsewhere = await commit(bus, who, body="The redemption gate stays shut.", workspace_id="ws_b")
    await commit(bus, who, body="Nothing on gates here.", workspace_id="ws_a")
    key = load_private_key(infra.proof_keys["runhost"])

    def grant(run_id: str, workspace_id: str | None = "ws_a") -> str:
        claims = {"run_id": run_id, "scope": who.scope, "refs": [], "expires_at": time.time() + 60}
        return sign_grant(key, GrantClaims.model_validate(claims | {"workspace_id": workspace_id}))

    memo_v1 = {"id": memo["id"], "version": 1}
    with pytest.raises(NotFound):  # neither admitted with the run nor found by its search yet
        await bus.call_raw(c.READ, memo_v1, actor=who, grant=grant("run_1"))
    found = await bus.call_raw(
        c.RUN_SEARCH, {"q": "when was the redemption gate lifted?"}, actor=who, grant=grant("run_1")
    )
    # Only the grant's workspace, best match first; another workspace's publication is never a hit.
    assert [h["id"] for h in found["items"]][:1] == [memo["id"]]
    assert elsewhere["id"] not in {h["id"] for h in found["items"]}
    assert "lifted" in found["items"][0]["snippet"] and found["items"][0]["version"] == 1
    assert (await bus.call_raw(c.READ, memo_v1, actor=who, grant=grant("run_1")))["body"].startswith("The redemption")
    with pytest.raises(NotFound):  # what one run found, another run may not read
        await bus.call_raw(c.READ, memo_v1, actor=who, grant=grant("run_2"))
    with pytest.raises(Unauthenticated):  # a person's call: the search is a run's
        await bus.call_raw(c.RUN_SEARCH, {"q": "gate"}, actor=who)
    with pytest.raises(Invalid):
        await bus.call_raw(c.RUN_SEARCH, {"q": "gate"}, actor=who, grant=grant("run_3", workspace_id=None))
    assert (await bus.call_raw(c.RUN_SEARCH, {"q": "the of"}, actor=who, grant=grant("run_1")))["items"] == []
    await bus.call_raw(c.WITHDRAW, {"id": memo["id"], "version": 1, "reason": "retracted"}, actor=who)
    found = await bus.call_raw(c.RUN_SEARCH, {"q": "redemption gate lifted"}, actor=who, grant=grant("run_1"))
    assert memo["id"] not in {h["id"] for h in found["items"]}


async def test_a_runs_search_pages_by_offset_through_every_match(
    publication: PublicationSettings, bus: BusClient, infra: Infra
) -> None:
    who = actor()
    memos = [await commit(bus, who, body=f"Memo {i} on the redemption gate.", workspace_id="ws_p") for i in range(7)]
    claims = {"run_id": "run_p", "scope": who.scope, "refs": [], "expires_at": time.time() + 60, "workspace_id": "ws_p"}
    grant = sign_grant(load_private_key(infra.proof_keys["runhost"]), GrantClaims.model_validate(claims))
    pages = [
        (await bus.call_raw(c.RUN_SEARCH, {"q": "redemption gate", "limit": 3, "offset": at}, actor=who, grant=grant))[
            "items"
        ]
        for at in (0, 3, 6, 9)
    ]
    assert [len(page) for page in pages] == [3, 3, 1, 0]
    assert sorted(h["id"] for page in pages for h in page) == sorted(m["id"] for m in memos), "each match once"


async def test_batch_check(publication: PublicationSettings, bus: BusClient) -> None:
    who = actor()
    a = await commit(bus, who)
    await bus.call_raw(c.REVISE, {"id": a["id"], "body": "a2", "expected_latest_version": 1}, actor=who)
    b = await commit(bus, who, body="B body")
    await bus.call_raw(c.WITHDRAW, {"id": b["id"], "version": 1, "reason": "bad"}, actor=who)
    refs = [
        {"kind": "publication", "id": a["id"], "version": 1},
        {"kind": "publication", "id": a["id"], "version": None},
        {"kind": "publication", "id": b["id"], "version": 1},
        {"kind": "publication", "id": "pub_missing", "version": 1},
        {"kind": "publication", "id": a["id"], "version": 7},
    ]
    items = (await bus.call_raw(c.CHECK, {"refs": refs}, actor=who))["items"]
    got = [(i["ref"]["version"], i["available"], i["reason"]) for i in items]
    assert got == [
        (1, True, None),
        (2, True, None),
        (1, False, "withdrawn"),
        (1, False, "not_found"),
        (7, False, "not_found"),
    ]
    assert items[0]["content_hash"] == a["content_hash"] and items[1]["title"] == "Report A"


async def test_request_key_makes_commit_idempotent(publication: PublicationSettings, bus: BusClient) -> None:
    who = actor()
    first = await commit(bus, who, request_key="run_1:finish", run_id="run_1")
    again = await commit(bus, who, request_key="run_1:finish", run_id="run_1")
    assert again == first
    with pytest.raises(Conflict):
        await commit(bus, who, body="other", request_key="run_1:finish", run_id="run_1")
    racers = await asyncio.gather(*(commit(bus, who, request_key="k2") for _ in range(8)))
    assert len({r["id"] for r in racers}) == 1


async def test_bad_payloads_get_replies_not_timeouts(publication: PublicationSettings, bus: BusClient) -> None:
    who = actor()
    with pytest.raises(Invalid) as err:
        await bus.call_raw(c.COMMIT, {"title": "t"}, actor=who)
    assert err.value.details["field"] == "body"
    with pytest.raises(Invalid):
        await bus.call_raw(c.READ, {"id": "x", "version": 0}, actor=who)
    with pytest.raises(TooLarge) as big:
        await commit(bus, who, body="x" * 5000)
    assert big.value.details["limit"] == 4096
    with pytest.raises(Invalid):
        await commit(bus, who, body="   ")
    nc = bus._nc
    raw = await nc.request(c.COMMIT, b"\xff\xfe not json", timeout=2)
    assert b'"invalid"' in raw.data


async def test_unreachable_service_is_a_typed_error(bus: BusClient) -> None:
    with pytest.raises(DomainError) as err:
        await bus.call_raw("dossier.nobody.here", {}, actor=actor(), timeout=0.5)
    assert err.value.code == "timeout"
