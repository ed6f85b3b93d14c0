"""Proof of caller (docs/security.md): a service's NATS credentials alone act for no scope.

Each attack is played on the real bus against the real owner services, with the credentials of a
service user that may send on the subject: runhost (which calls the reads of a run), and assets and
publication (which may send on their own subjects). Every forged envelope is answered `forbidden` and
never acted on; the same envelope with a proof a trusted signer made is answered, so the refusals are
the proof's and nothing else's.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import nats
import orjson
import pytest
from nacl.signing import SigningKey, VerifyKey

from services.assets.app import create_app as create_assets
from services.publication.app import create_app as create_publication
from services.workspace.app import create_app as create_workspace
from shared.batching import BATCH_HEADER, frames, unframe
from shared.bus import BusClient
from shared.contracts import assets, publication, workspace
from shared.contracts.common import Actor, BusReply, Ref
from shared.errors import Unauthenticated, Unreachable
from shared.grants import GrantClaims, sign_grant
from shared.natsauth import workspace_durables
from shared.proof import (
    SIGNERS,
    TRUSTED,
    ProofSigner,
    b64,
    load_private_key,
    parse_public_keys,
    signer_for,
    unb64,
)
from shared.settings import AssetsSettings, CommonSettings, PublicationSettings, WorkspaceSettings
from shared.subscriptions import subscriptions_live
from tests.service.workspace.conftest import serving
from tests.support.infra import Infra
from tests.support.owners import create_durables_from_now, delete_durables
from tests.support.service import settings_from

VICTIM = Actor(scope="victim-" + uuid.uuid4().hex[:8], principal="alice")
ELSEWHERE = Actor(scope="elsewhere-" + uuid.uuid4().hex[:8], principal="mallory")


@pytest.fixture
async def owners(infra: Infra, bus: BusClient) -> AsyncIterator[dict[str, Any]]:
    """Publication, workspace and assets serving, and one scope's workspace, checkpoint and publication."""
    prefix = f"wsproof{uuid.uuid4().hex[:8]}"
    durables = workspace_durables(prefix)
    await create_durables_from_now(bus._nc, durables)
    ws_settings = settings_from(infra.settings_env("workspace", DOSSIER_CONSUMER_PREFIX=prefix), WorkspaceSettings)
    try:
        async with (
            serving(create_publication(settings_from(infra.settings_env("publication"), PublicationSettings)), bus),
            serving(create_workspace(ws_settings), bus),
            serving(create_assets(settings_from(infra.settings_env("assets"), AssetsSettings)), bus),
        ):
            ws = await bus.call_raw(workspace.CREATE, {"title": "Fund X", "goal": "Is it liquid?"}, actor=VICTIM)
            wid = ws["id"]
            await bus.call_raw(
                workspace.CHECKPOINT_UPDATE,
                {"workspace_id": wid, "expected_revision": 0, "summary": "secret plan"},
                actor=VICTIM,
            )
            pub = await bus.call_raw(publication.COMMIT, {"title": "R", "body": "the victim's report"}, actor=VICTIM)
            other_ws = await bus.call_raw(workspace.CREATE, {"title": "Fund Y", "goal": "Private"}, actor=VICTIM)
            other = await bus.call_raw(publication.COMMIT, {"title": "S", "body": "her other report"}, actor=VICTIM)
            yield {
                "workspace_id": wid,
                "publication_id": pub["id"],
                "other_workspace_id": other_ws["id"],
                "other_publication_id": other["id"],
            }
    finally:
        await delete_durables(bus._nc, durables)


def targets(seeded: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What the issue's attacker read: a scope's workspace, checkpoint, publication body and evidence."""
    return {
        workspace.GET: {"workspace_id": seeded["workspace_id"]},
        workspace.CHECKPOINT_GET: {"workspace_id": seeded["workspace_id"]},
        publication.READ: {"id": seeded["publication_id"], "version": 1},
        assets.SEARCH: {"q": "report"},
    }


# The service user that forges, and the subjects its NATS permissions let it send on.
REACH: dict[str, tuple[str, ...]] = {
    "runhost": (workspace.GET, workspace.CHECKPOINT_GET, publication.READ, assets.SEARCH),
    "assets": (assets.SEARCH,),
    "publication": (publication.READ,),
}


async def send(nc: nats.NATS, subject: str, data: dict[str, Any], *, actor: Actor, **envelope: Any) -> BusReply:
    body = {"actor": actor.model_dump(), "request_id": envelope.pop("request_id", "req-forged"), "data": data}
    body |= envelope
    return BusReply.model_validate_json((await nc.request(subject, orjson.dumps(body), timeout=5)).data)


def key(infra: Infra, signer: str) -> SigningKey:
    return load_private_key(infra.proof_keys[signer])


def forgeries(infra: Infra, subject: str, data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Envelopes naming the victim's scope and carrying `data`, each with what a thief of a service's password
    could add. Every proof is made over `data`, so each is refused for what it names and nothing else."""
    rid = "req-forged"
    runhost = ProofSigner("runhost", key(infra, "runhost"))
    gateway = ProofSigner("gateway", key(infra, "gateway"))

    def made(signer: ProofSigner, subject: str, actor: Actor, rid: str, **kw: Any) -> str:
        return signer.prove(subject, actor, rid, data=data, **kw)

    other_grant = sign_grant(
        key(infra, "runhost"), GrantClaims(run_id="run_x", scope=ELSEWHERE.scope, expires_at=time.time() + 60)
    )
    forged: dict[str, dict[str, Any]] = {
        "no proof, no grant": {},
        "a run grant for another scope": {"grant": other_grant},
        "an expired proof": {"proof": made(gateway, subject, VICTIM, rid, expires_at=time.time() - 1)},
        "a proof that would live an hour": {
            "proof": made(gateway, subject, VICTIM, rid, expires_at=time.time() + 3600)
        },
        "a gateway-like proof by an untrusted key": {
            "proof": made(ProofSigner("gateway", SigningKey.generate()), subject, VICTIM, rid)
        },
        "a proof for another scope": {"proof": made(gateway, subject, ELSEWHERE, rid)},
        "a proof for another subject": {"proof": made(gateway, workspace.LIST, VICTIM, rid)},
        "a proof for another request": {"proof": made(gateway, subject, VICTIM, "req-earlier")},
        "a proof for another payload": {
            "proof": gateway.prove(subject, VICTIM, rid, data={**data, "unrelated": 1}),
        },
        "a malformed proof": {"proof": "not.a-proof"},
    }
    # A signer that does not call the subject; there is none for the evidence search, which every signer
    # calls (the workspace, for a stale claim's best matching passage).
    untrusted = [name for name in SIGNERS if name not in TRUSTED.get(subject, ())]
    if untrusted:
        forged["a proof signed by a signer not trusted on it"] = {
            "proof": made(ProofSigner(untrusted[0], key(infra, untrusted[0])), subject, VICTIM, rid)
        }
    if subject in (publication.READ, assets.SEARCH):
        forged["runhost's own proof of a run's read, without the run's grant"] = {
            "proof": made(runhost, subject, VICTIM, rid)
        }
    return forged


@pytest.mark.parametrize("user", sorted(REACH))
async def test_a_service_password_reads_no_scope_without_proof(owners: dict[str, Any], infra: Infra, user: str) -> None:
    nc = await infra.connect(user)
    try:
        for subject in REACH[user]:
            data = targets(owners)[subject]
            for what, extra in forgeries(infra, subject, data).items():
                reply = await send(nc, subject, data, actor=VICTIM, **extra)
                assert not reply.ok and reply.error is not None, f"{user} read {subject} with {what}: {reply.data}"
                assert reply.error.code == "forbidden", (user, subject, what, reply.error)
            # The same envelope with a proof that a trusted signer made is answered: the proof is what was missing.
            proof = infra.signer().prove(subject, VICTIM, "req-genuine", data=data)
            genuine = await send(nc, subject, data, actor=VICTIM, proof=proof, request_id="req-genuine")
            assert genuine.ok, (user, subject, genuine.error)
    finally:
        await nc.close()


def mint_attempts(env: dict[str, str]) -> list[Callable[[GrantClaims], str]]:
    """Every way a value in a verifier's environment could sign a grant: as an HMAC secret, as an Ed25519 seed."""
    attempts: list[Callable[[GrantClaims], str]] = []
    for value in env.values():
        for part in [value, *(p.partition("=")[2] for p in value.split(","))]:

            def hmac_grant(claims: GrantClaims, secret: str = part) -> str:
                payload = json.dumps(claims.model_dump(), separators=(",", ":"), sort_keys=True).encode()
                mac = hmac.new(secret.encode(), payload, hashlib.sha256).digest()
                return f"{b64(payload)}.{b64(mac)}"

            attempts.append(hmac_grant)
            try:
                seed = SigningKey(unb64(part))
            except ValueError:
                continue
            attempts.append(lambda claims, k=seed: sign_grant(k, claims))
    return attempts


@pytest.mark.parametrize("service", ["publication", "assets", "artifact"])
async def test_a_verifier_holds_only_public_keys_and_cannot_mint(
    owners: dict[str, Any], infra: Infra, bus: BusClient, service: str
) -> None:
    env = infra.settings_env(service)
    settings = settings_from(env, CommonSettings)
    assert "DOSSIER_PROOF_KEY" not in env and settings.proof_key == ""
    keys = parse_public_keys(settings.proof_public_keys)
    assert set(keys) == {"gateway", "runhost", "workspace"}
    assert all(isinstance(k, VerifyKey) for k in keys.values())
    assert signer_for(service, settings) is None
    # Whatever the verifier holds, a grant made with it is refused; runhost's own grant is read.
    claims = GrantClaims(
        run_id="run_forged",
        scope=VICTIM.scope,
        refs=[Ref(kind="publication", id=owners["publication_id"], version=1).key()],
        expires_at=time.time() + 60,
    )
    as_runhost = BusClient(bus._nc, signer=ProofSigner("runhost", key(infra, "runhost")))
    read = publication.ReadRequest(id=owners["publication_id"], version=1)
    for mint in mint_attempts(env):
        with pytest.raises(Unauthenticated):
            await as_runhost.call(publication.READ, read, actor=VICTIM, grant=mint(claims))
    genuine = await as_runhost.call(
        publication.READ, read, actor=VICTIM, grant=sign_grant(key(infra, "runhost"), claims)
    )
    assert genuine.body == "the victim's report"


def interceptions(seeded: dict[str, Any]) -> dict[str, list[tuple[str, dict[str, Any], dict[str, Any]]]]:
    """Per service password: the victim's request on a subject it may take, and what the thief swaps in."""
    pub, other = seeded["publication_id"], seeded["other_publication_id"]
    return {
        "publication": [
            (publication.READ, {"id": pub, "version": 1}, {"id": other, "version": 1}),
            (
                publication.WITHDRAW,
                {"id": pub, "version": 1, "reason": "superseded"},
                {"id": other, "version": 1, "reason": "superseded"},
            ),
        ],
        "workspace": [
            (
                workspace.GET,
                {"workspace_id": seeded["workspace_id"]},
                {"workspace_id": seeded["other_workspace_id"]},
            )
        ],
        "assets": [(assets.SEARCH, {"q": "report"}, {"q": "salary"})],
    }


async def intercept(nc: nats.NATS, victim: BusClient, subject: str, data: dict[str, Any], queue: str) -> bytes:
    """Take the victim's request as a member of the service's queue group (the one way the server lets a
    thief of the password receive requests): asked until the thief's turn comes, a few tries at most."""
    taken: list[bytes] = []

    async def steal(msg: nats.aio.msg.Msg) -> None:
        taken.append(bytes(msg.data))

    sub = await nc.subscribe(subject, queue=queue, cb=steal)
    await subscriptions_live(nc)
    try:
        for _ in range(40):
            try:
                await victim.call_raw(subject, data, actor=VICTIM, timeout=0.5)
            except Unreachable:
                pass
            if taken:
                return taken[0]
        raise AssertionError(f"the queue group never handed {subject} to the thief")
    finally:
        await sub.unsubscribe()


async def resend(nc: nats.NATS, subject: str, raw: bytes) -> BusReply:
    return BusReply.model_validate_json((await nc.request(subject, raw, timeout=5)).data)


@pytest.mark.parametrize("user", ["publication", "workspace", "assets"])
async def test_a_taken_request_cannot_be_changed_or_used_twice(
    owners: dict[str, Any], infra: Infra, bus: BusClient, user: str
) -> None:
    """Issue 35's thief: a service password, the victim's request taken off the bus, another id swapped in
    (another publication's body, a withdrawal of another version), and the same envelope sent again."""
    victim = BusClient(bus._nc, signer=infra.signer())
    nc = await infra.connect(user)
    try:
        for subject, data, swapped in interceptions(owners)[user]:
            raw = await intercept(nc, victim, subject, data, queue=user)
            envelope = orjson.loads(raw)
            changed = await resend(nc, subject, orjson.dumps({**envelope, "data": swapped}))
            assert changed.error is not None and changed.error.code == "forbidden", (subject, changed)
            assert "another payload" in changed.error.message
            # The stolen request, delivered as the victim sent it, is answered once, and never again.
            assert (await resend(nc, subject, raw)).ok
            again = await resend(nc, subject, raw)
            assert again.error is not None and again.error.code == "forbidden", (subject, again)
            assert "already used" in again.error.message
        if user == "publication":
            kept = await victim.call(
                publication.READ, publication.ReadRequest(id=owners["other_publication_id"], version=1), actor=VICTIM
            )
            assert kept.status == "active" and kept.body == "her other report"
    finally:
        await nc.close()


async def test_a_batch_taken_off_the_bus_vouches_for_nothing_else(
    owners: dict[str, Any], infra: Infra, bus: BusClient
) -> None:
    """The victim's reads asked for together go in one message (shared/batching.py). A thief with the
    publication password takes that message off the bus: each envelope in it still vouches for its own read
    alone, once. Sent back with one payload swapped, that one is refused and the rest answered; sent back
    again, each is refused as used, but for the one refused before."""
    victim = BusClient(bus._nc, signer=infra.signer())
    nc = await infra.connect("publication")
    taken: list[nats.aio.msg.Msg] = []

    async def steal(msg: nats.aio.msg.Msg) -> None:
        taken.append(msg)

    sub = await nc.subscribe(publication.READ, queue="publication", cb=steal)
    await subscriptions_live(nc)
    read = publication.ReadRequest(id=owners["publication_id"], version=1)
    try:
        for _ in range(20):
            await asyncio.gather(
                *(victim.call(publication.READ, read, actor=VICTIM, timeout=0.5) for _ in range(4)),
                return_exceptions=True,
            )
            if taken:
                break
        else:
            raise AssertionError("the queue group never handed the victim's batch to the thief")
    finally:
        await sub.unsubscribe()
    stolen = taken[0]
    assert stolen.headers == {BATCH_HEADER: "4"}
    envelopes = [orjson.loads(part) for part in unframe(stolen.data, 4)]
    swapped = [{**envelopes[0], "data": {"id": owners["other_publication_id"], "version": 1}}, *envelopes[1:]]

    async def send_batch(items: list[dict[str, Any]]) -> list[BusReply]:
        body = frames([orjson.dumps(item) for item in items])
        raw = (await nc.request(publication.READ, body, headers={BATCH_HEADER: str(len(items))}, timeout=5)).data
        return [BusReply.model_validate_json(part) for part in unframe(raw, len(items))]

    try:
        first = await send_batch(swapped)
        assert first[0].error is not None and first[0].error.code == "forbidden", first[0]
        assert "another payload" in first[0].error.message
        assert all(r.ok and r.data["body"] == "the victim's report" for r in first[1:]), first
        again = await send_batch(envelopes)
        assert again[0].ok and again[0].data["body"] == "the victim's report", again[0]
        assert all(r.error is not None and "already used" in r.error.message for r in again[1:]), again
    finally:
        await nc.close()


async def test_a_request_taken_from_a_batch_vouches_for_nothing_else(
    owners: dict[str, Any], infra: Infra, bus: BusClient
) -> None:
    """The victim's reads asked for in one turn share one signature (shared/proof.py). A thief with the
    publication password takes one of them off the bus: with its signature and the batch's digests it
    cannot vouch for claims of its own (another publication), nor add their digest to the list, though the
    owner has verified that signature already for the batch's other reads."""
    victim = BusClient(bus._nc, signer=infra.signer())
    nc = await infra.connect("publication")
    taken: list[bytes] = []

    async def steal(msg: nats.aio.msg.Msg) -> None:
        taken.append(bytes(msg.data))

    sub = await nc.subscribe(publication.READ, queue="publication", cb=steal)
    await subscriptions_live(nc)
    read = {"id": owners["publication_id"], "version": 1}
    try:
        for _ in range(20):
            # By the subject's plain name, each read goes in a message of its own (a batch of messages is
            # test_a_batch_taken_off_the_bus_vouches_for_nothing_else's), so the queue group shares them out.
            # The owner's answers are awaited as long as any of this file's requests: under a loaded test run
            # half a second saw none of them (the read the thief took waits it out, once).
            answers = await asyncio.gather(
                *(victim.call_raw(publication.READ.name, read, actor=VICTIM, timeout=5) for _ in range(8)),
                return_exceptions=True,
            )
            if taken:
                break
        else:
            raise AssertionError("the queue group never handed a read of the batch to the thief")
    finally:
        await sub.unsubscribe()
    # The rest of the batch was answered by the owner, which verified the batch's signature doing so.
    assert any(isinstance(a, dict) for a in answers), answers
    envelope = orjson.loads(taken[0])
    _, signature, digests = envelope["proof"].split(".")
    assert len(unb64(digests)) == 8 * 32
    wanted = {"id": owners["other_publication_id"], "version": 1}
    # Claims as the gateway words them, for the thief's own read, under a key of the thief's.
    claims_text = (
        ProofSigner("gateway", SigningKey.generate())
        .prove(publication.READ, VICTIM, "req-thief", data=wanted)
        .split(".")[0]
    )
    claims = unb64(claims_text)
    added = b64(unb64(digests) + hashlib.sha256(claims).digest())
    try:
        for tail, refusal in ((f"{signature}.{digests}", "does not cover"), (f"{signature}.{added}", "not verify")):
            proof = f"{claims_text}.{tail}"
            reply = await send(nc, publication.READ, wanted, actor=VICTIM, proof=proof, request_id="req-thief")
            assert reply.error is not None and reply.error.code == "forbidden", reply
            assert refusal in reply.error.message
        # The stolen read itself, delivered unchanged, is answered once.
        assert (await resend(nc, publication.READ, taken[0])).ok
    finally:
        await nc.close()
