"""How an outside agent's run ends under races, played as an attacker holding one credential would over HTTP:
a cancel racing a finish, a take-over racing the old session's finish, two finishes with one lease, and
parallel reads with one lease. Each race runs many times; the offsets between the two sides sweep from a
little before the finish to its whole length, so some land inside it. Nothing here asserts on time.

The run's end is decided once (services/runhost/finishing.py): either the run is cancelled (or taken over)
and nothing is published for it, or it completes with exactly the answer whose finish answered 200. A forced
take-over that arrives while a finish is under way waits for it, a few seconds at most: played with the
publication service stopped (SIGSTOP), so the finish stays under way until the test lets it go on."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from tests.support.api import Api, error_of, probe
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.probe import probe_until
from tests.support.stack import RunningStack

RACES = 10


class Setting:
    def __init__(self, api: Api, workspace: dict[str, Any], a: dict[str, Any], b: dict[str, Any]):
        self.api, self.workspace, self.a, self.b = api, workspace, a, b

    def cites(self, pub: dict[str, Any], words: str) -> str:
        return f"- {words} ({pub['id']}@v1)."


@pytest.fixture
def setting(stack: RunningStack) -> Setting:
    api = Api(stack)
    ws = api.workspace()
    a = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    b = api.publish("Report B: Fund X stress", "Report B finds Fund X liquidity inadequate under stress.", ws["id"])
    api.wait_catalog(ws["id"], 2)
    return Setting(api, ws, a, b)


@pytest.fixture
async def client(setting: Setting) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=str(setting.api.http.base_url), headers=dict(setting.api.http.headers), timeout=60
    ) as http:
        yield http


async def admit(client: httpx.AsyncClient, setting: Setting, *reads: dict[str, Any]) -> tuple[str, str]:
    """An external run that has read each of `reads` (publications at version 1): its id and lease token."""
    body = {"question": "Does Report A hold?", "request_id": f"race-{time.monotonic_ns()}", "driver": "external"}
    r = await client.post(f"/v1/workspaces/{setting.workspace['id']}/runs", json=body)
    assert r.status_code == 202, r.text
    run = r.json()
    token = run["lease"]["token"]
    for pub in reads:
        ref = {"kind": "publication", "id": pub["id"], "version": 1}
        read = await client.post(f"/v1/runs/{run['id']}/read", json={"ref": ref}, headers={"X-Run-Lease": token})
        assert read.status_code == 200, read.text
    return run["id"], token


async def finish(client: httpx.AsyncClient, run_id: str, token: str, answer: str) -> httpx.Response:
    return await client.post(f"/v1/runs/{run_id}/finish", json={"answer": answer}, headers={"X-Run-Lease": token})


async def after(delay: float, call: Any) -> Any:
    await asyncio.sleep(max(delay, 0))
    return await call


async def finish_seconds(client: httpx.AsyncClient, setting: Setting) -> float:
    """How long an uncontested finish takes here: the span the offsets of the races sweep."""
    run_id, token = await admit(client, setting, setting.a)
    started = time.monotonic()
    done = await finish(client, run_id, token, setting.cites(setting.a, "Fund X can meet redemptions"))
    assert done.status_code == 200, done.text
    return time.monotonic() - started


def offsets(span: float) -> list[float]:
    """How long after the finish the other side starts (before it, when negative): from a little before the
    finish to its whole span, denser near its start, where the finish decides the run's end."""
    return [span * ((i - 2) / (RACES - 3)) * abs((i - 2) / (RACES - 3)) for i in range(RACES)]


async def published_for(stack: RunningStack, run_id: str) -> list[asyncpg.Record]:
    """Every publication version the publication service committed for the run, read from its database."""
    conn = await asyncpg.connect(stack.dsn("publication"))
    try:
        return list(
            await conn.fetch(
                "SELECT publication_id AS id, version, body FROM publication_versions WHERE run_id = $1", run_id
            )
        )
    finally:
        await conn.close()


async def test_a_cancel_racing_a_finish_never_leaves_a_cancelled_run_published(
    stack: RunningStack, setting: Setting, client: httpx.AsyncClient
) -> None:
    span = await finish_seconds(client, setting)
    answer = setting.cites(setting.a, "Fund X can meet redemptions within 30 days")
    ended: dict[str, str] = {}
    wrong: list[str] = []
    for delay in offsets(span):
        run_id, token = await admit(client, setting, setting.a)
        finished, cancelled = await asyncio.gather(
            after(-delay, finish(client, run_id, token, answer)),
            after(delay, client.post(f"/v1/runs/{run_id}/cancel")),
        )
        assert cancelled.status_code == 200, cancelled.text
        run = setting.api.run(run_id)
        published = [(p["id"], p["version"], p["body"]) for p in await published_for(stack, run_id)]
        ended[run_id] = run["status"]
        if run["status"] == "cancelled":
            if finished.status_code != 409 or run["publication"] is not None or published:
                wrong.append(f"cancelled, finish {finished.status_code}, published {published}")
        elif (run["status"], finished.status_code) != ("completed", 200) or published != [
            (run["publication"]["id"], run["publication"]["version"], answer)
        ]:
            wrong.append(f"{run['status']}, finish {finished.status_code}, published {published}")
    assert not wrong, f"{len(wrong)} of {RACES} races ended wrong: {wrong}"
    # What the workspace lists follows by events: once every completed run's answer is there, no cancelled
    # run's is.
    completed = {r for r, status in ended.items() if status == "completed"}

    def listed() -> set[str] | None:
        catalog = setting.api.ok("GET", f"/v1/workspaces/{setting.workspace['id']}/catalog?limit=200")
        runs = {i["run_id"] for i in catalog["items"] if i["kind"] == "publication" and i["run_id"] in ended}
        return runs if completed <= runs else None

    assert probe(listed, timeout=30) == completed, Counter(ended.values())
    print(f"cancel racing finish: {dict(Counter(ended.values()))}")


async def test_a_take_over_racing_the_old_sessions_finish_publishes_exactly_the_winners_answer(
    stack: RunningStack, setting: Setting, client: httpx.AsyncClient
) -> None:
    span = await finish_seconds(client, setting)
    old_answer = setting.cites(setting.a, "The old session says Fund X meets redemptions")
    new_answer = setting.cites(setting.a, "The new session says Fund X meets redemptions")
    wrong: list[str] = []
    winners: Counter[str] = Counter()
    for delay in offsets(span):
        run_id, token = await admit(client, setting, setting.a)

        async def take_and_finish(run_id: str = run_id, delay: float = delay) -> tuple[httpx.Response, Any]:
            await asyncio.sleep(max(delay, 0))
            taken = await client.post(f"/v1/runs/{run_id}/lease/take", json={"force": True})
            if taken.status_code != 200:
                return taken, None
            return taken, await finish(client, run_id, taken.json()["lease"]["token"], new_answer)

        old, (taken, new) = await asyncio.gather(
            after(-delay, finish(client, run_id, token, old_answer)), take_and_finish()
        )
        # The take-over may lose to a finish that won the run (409), and the new session never finishes.
        tries = {"old": old} | ({"new": new} if new is not None else {"take": taken})
        codes = {who: r.status_code for who, r in tries.items()}
        won = [who for who, code in codes.items() if code == 200]
        run = setting.api.run(run_id)
        published = [p["body"] for p in await published_for(stack, run_id)]
        answer = {"old": old_answer, "new": new_answer}.get(won[0]) if len(won) == 1 else None
        if sorted(codes.values()) != [200, 409] or run["status"] != "completed" or published != [answer]:
            shown = ["old" if b == old_answer else "new" for b in published]
            wrong.append(f"answers {codes}, {run['status']}, published the {shown} answer")
        winners.update(won)
    print(f"take-over racing finish, 200 for: {dict(winners)}")
    assert not wrong, f"{len(wrong)} of {RACES} races ended wrong: {wrong}"


async def finishing_lock(stack: RunningStack, run_id: str) -> list[bool]:
    """Who holds (True) and who waits for (False) the run's finishing lock: a finish under way holds it until it
    has won or failed, and a take-over waits for it (services/runhost/external_repository.py)."""
    conn = await asyncpg.connect(stack.dsn("runhost"))
    try:
        rows = await conn.fetch(
            "SELECT granted FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1"
            " AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)",
            f"finish|{run_id}",
        )
        return [bool(r["granted"]) for r in rows]
    finally:
        await conn.close()


class Held:
    """The publication service, stopped (SIGSTOP) from `stop` until `release` or the block's end, so that a
    finish citing a publication stays under way: before it may win, it asks that service whether what it cites
    is still usable."""

    def __init__(self, stack: RunningStack):
        self.pid = stack.pid("publication")

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def stop(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def release(self) -> None:
        os.kill(self.pid, signal.SIGCONT)


async def _holds(stack: RunningStack, run_id: str, expected: list[bool]) -> bool:
    return sorted(await finishing_lock(stack, run_id), reverse=True) == expected


async def take_over_during_finish(
    stack: RunningStack, setting: Setting, client: httpx.AsyncClient, held: Held
) -> tuple[str, str, asyncio.Task[httpx.Response], asyncio.Task[httpx.Response]]:
    """A run that read Report A; then, with the publication service stopped, a finish under way (it holds the
    run's finishing lock) and a forced take-over waiting for it. The run, the finish's answer, and the two
    requests in flight."""
    run_id, token = await admit(client, setting, setting.a)
    held.stop()
    answer = setting.cites(setting.a, "Fund X can meet redemptions within 30 days")
    finishing = asyncio.create_task(finish(client, run_id, token, answer))
    await probe_until(lambda: _holds(stack, run_id, [True]), timeout=30)
    taking = asyncio.create_task(client.post(f"/v1/runs/{run_id}/lease/take", json={"force": True}))
    await probe_until(lambda: _holds(stack, run_id, [True, False]), timeout=30)
    return run_id, answer, finishing, taking


@pytest.mark.local_stack
async def test_a_forced_take_over_waits_for_a_finish_under_way_and_loses_to_it(
    stack: RunningStack, setting: Setting, client: httpx.AsyncClient
) -> None:
    with Held(stack) as held:
        run_id, answer, finishing, taking = await take_over_during_finish(stack, setting, client, held)
        held.release()
        finished, taken = await finishing, await taking
    assert finished.status_code == 200, finished.text
    assert taken.status_code == 409 and error_of(taken)["details"] == {"lease": "finishing"}, taken.text
    run = setting.api.run(run_id)
    assert run["status"] == "completed" and run["lease_state"]["epoch"] == 1
    assert [p["body"] for p in await published_for(stack, run_id)] == [answer]


@pytest.mark.local_stack
async def test_a_forced_take_over_waits_for_a_finish_under_way_only_so_long(
    stack: RunningStack, setting: Setting, client: httpx.AsyncClient
) -> None:
    with Held(stack) as held:
        run_id, _, finishing, taking = await take_over_during_finish(stack, setting, client, held)
        # The finish cannot go on while the publication service is stopped: the take-over stops waiting.
        taken = await taking
    finished = await finishing
    assert taken.status_code == 200, taken.text
    assert finished.status_code in (409, 504), finished.text
    run = setting.api.run(run_id)
    assert run["status"] == "running" and run["lease_state"]["epoch"] == 2 and run["publication"] is None
    assert await published_for(stack, run_id) == []


async def test_parallel_reads_with_one_lease_record_each_ledger_row_once(
    setting: Setting, client: httpx.AsyncClient
) -> None:
    upload = setting.api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", setting.workspace["id"])
    assert upload["status"] == "active"
    run_id, token = await admit(client, setting)
    lease = {"X-Run-Lease": token}
    catalogs = await asyncio.gather(*(client.get(f"/v1/runs/{run_id}/catalog", headers=lease) for _ in range(5)))
    assert all(r.status_code == 200 for r in catalogs)
    hits = (await client.get(f"/v1/runs/{run_id}/search", params={"q": "redemption gates"}, headers=lease)).json()
    passage = next(h for h in hits["items"] if h["evidence_id"] is not None)
    evidence = {"ref": {"kind": "evidence", "id": passage["evidence_id"]}}
    reads = await asyncio.gather(
        *(client.post(f"/v1/runs/{run_id}/read", json=evidence, headers=lease) for _ in range(20))
    )
    assert {r.status_code for r in reads} == {200}, [r.text for r in reads if r.status_code != 200]
    publication = {"ref": {"kind": "publication", "id": setting.b["id"], "version": 1}}
    reads = await asyncio.gather(
        *(client.post(f"/v1/runs/{run_id}/read", json=publication, headers=lease) for _ in range(5))
    )
    assert {r.status_code for r in reads} == {200}, [r.text for r in reads if r.status_code != 200]
    rows = Counter(
        (r["stage"], r["ref"]["kind"], r["ref"]["id"], r["ref"]["version"], r["locator"])
        for r in setting.api.ledger(run_id)
        if r["ref"] is not None
    )
    twice = {row: n for row, n in rows.items() if n > 1}
    assert rows[("read", "source", "announcement", 1, passage["locator"])] == 1, twice
    assert rows[("read", "publication", setting.b["id"], 1, None)] == 1, twice
    assert not twice


async def test_two_finishes_with_one_lease_include_only_the_winners_citations(
    stack: RunningStack, setting: Setting, client: httpx.AsyncClient
) -> None:
    wrong: list[str] = []
    for _ in range(RACES):
        run_id, token = await admit(client, setting, setting.a, setting.b)
        answers = {
            setting.a["id"]: setting.cites(setting.a, "Fund X can meet redemptions"),
            setting.b["id"]: setting.cites(setting.b, "Report B finds Fund X liquidity inadequate"),
        }
        tries = await asyncio.gather(*(finish(client, run_id, token, answer) for answer in answers.values()))
        codes = sorted(r.status_code for r in tries)
        won = [cited for cited, r in zip(answers, tries, strict=True) if r.status_code == 200]
        included = [
            (r["ref"]["id"], r["ref"]["version"]) for r in setting.api.ledger(run_id) if r["stage"] == "included"
        ]
        run = setting.api.run(run_id)
        sources = setting.api.read(run["publication"])["sources"] if run["publication"] else None
        published = [p["body"] for p in await published_for(stack, run_id)]
        expected = won and (
            [(won[0], 1)],
            [{"kind": "publication", "id": won[0], "version": 1}],
            [answers[won[0]]],
        )
        if codes != [200, 409] or (included, sources, published) != expected:
            wrong.append(f"answers {codes}, included {len(included)} rows, sources {sources}")
    assert not wrong, f"{len(wrong)} of {RACES} races ended wrong: {wrong}"
