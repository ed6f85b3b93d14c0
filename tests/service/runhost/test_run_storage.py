"""Run files stored once per content, on real PostgreSQL and S3 (services/runhost/memory.py, retention.py):
two runs writing the same text keep one object; a content is deleted only once no run's file names it, even
when the sweeper runs between a writer's put and its index row; files of the per-run layout still read back
and go with their run's release; an ended run's journal is trimmed to what a resume needs, and its ledger
and file index sealed into one document each that reads exactly as their rows did."""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

import asyncpg
import pytest

from services.runhost.actor_runs import ActorRuns
from services.runhost.journal import trimmed_entry
from services.runhost.journal_repository import JournalRepository
from services.runhost.leases import StaleLease
from services.runhost.memory import CONTENT_PREFIX, ContentCache, RunFiles
from services.runhost.repository import WorkerRuns
from services.runhost.retention import StorageSweeper
from shared.blobs import Blobs, content_key
from shared.contracts.common import PageRequest
from shared.db import Database
from shared.errors import NotFound
from shared.paging import Keyset
from shared.settings import CommonSettings, RunhostSettings
from tests.service.runhost.test_leases import OWNER, REF, admitted_run
from tests.support.infra import Infra
from tests.support.service import settings_from

PASSAGE = "# fundx@v1 page:1\n\nFund X met every redemption within 30 days. " * 20


@pytest.fixture
async def stores(infra: Infra) -> tuple[Blobs, Blobs]:
    """(runhost's own key, the tester's key on the same bucket: to look at what is stored)."""
    env = infra.settings_env("runhost")
    blobs = Blobs(settings_from(env, CommonSettings))
    await blobs.ensure_bucket()
    return blobs, infra.blobs_as("tester", env["DOSSIER_S3_BUCKET"])


def sweeper(db: Database, blobs: Blobs, **settings: Any) -> StorageSweeper:
    values = {"run_files_grace_seconds": 0.0} | settings
    return StorageSweeper(db=db, blobs=blobs, settings=RunhostSettings(**values))


async def running_run(db: Database, repo: WorkerRuns) -> str:
    run_id = await admitted_run(db)
    async with db.transaction() as conn:
        await conn.execute("UPDATE runs SET status = 'running', lease_epoch = 1 WHERE id = $1", run_id)
    return run_id


async def end(db: Database, run_id: str) -> None:
    async with db.transaction() as conn:
        await conn.execute("UPDATE runs SET status = 'completed', finished_at = now() WHERE id = $1", run_id)


async def refs(db: Database, text: str) -> int | None:
    async with db.pool.acquire() as conn:
        value = await conn.fetchval("SELECT refs FROM file_contents WHERE sha256 = $1", sha(text))
    return None if value is None else int(value)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def key_of(text: str) -> str:
    return content_key(sha(text), CONTENT_PREFIX)


async def test_two_runs_reading_one_passage_store_it_once(db: Database, stores: tuple[Blobs, Blobs]) -> None:
    blobs, look = stores
    repo = WorkerRuns()
    first, second = await running_run(db, repo), await running_run(db, repo)
    for run_id in (first, second):
        await RunFiles(blobs, db, repo, run_id, 1).write("sources/fundx@v1-page_1.txt", PASSAGE)
    for run_id in (first, second):
        assert await RunFiles(blobs, db, repo, run_id, None).read("sources/fundx@v1-page_1.txt") == PASSAGE
    assert await refs(db, PASSAGE) == 2
    assert await look.exists(key_of(PASSAGE))
    # The object is the passage deflated: a third of its size or less.
    stored = await look.get_bytes(key_of(PASSAGE))
    assert zlib.decompress(stored) == PASSAGE.encode() and len(stored) * 3 < len(PASSAGE.encode())
    assert not await look.exists(f"runs/{first}/sources/fundx@v1-page_1.txt@{sha(PASSAGE)}")

    # The first run's files are released; the second still names the passage, so it stays.
    await end(db, first)
    swept = await sweeper(db, blobs, run_retention_days=0).sweep_once()
    assert swept.released == 1 and swept.contents == 0
    assert await refs(db, PASSAGE) == 1 and await look.exists(key_of(PASSAGE))
    assert await RunFiles(blobs, db, repo, second, None).read("sources/fundx@v1-page_1.txt") == PASSAGE
    with pytest.raises(NotFound):
        await RunFiles(blobs, db, repo, first, None).read("sources/fundx@v1-page_1.txt")

    await end(db, second)
    swept = await sweeper(db, blobs, run_retention_days=0).sweep_once()
    assert swept.released == 1 and swept.contents == 1
    assert await refs(db, PASSAGE) is None and not await look.exists(key_of(PASSAGE))


async def test_a_rewritten_file_lets_go_of_its_old_content_only(db: Database, stores: tuple[Blobs, Blobs]) -> None:
    blobs, look = stores
    repo = WorkerRuns()
    run_id = await running_run(db, repo)
    files = RunFiles(blobs, db, repo, run_id, 1)
    await files.write("plan.md", "# plan v1")
    await files.write("plan.md", "# plan v2")
    await files.write("draft.md", "# plan v2")  # another file with the same text: one content, two names
    assert await refs(db, "# plan v1") == 0 and await refs(db, "# plan v2") == 2

    # Within the grace period nothing is deleted; after it, only the content no file names.
    assert await sweeper(db, blobs, run_files_grace_seconds=3600).let_go_of_contents() == 0
    assert await sweeper(db, blobs).let_go_of_contents() == 1
    assert not await look.exists(key_of("# plan v1")) and await look.exists(key_of("# plan v2"))
    assert await files.read("plan.md") == await files.read("draft.md") == "# plan v2"
    # The same text written again after its content was let go is stored again.
    await files.write("draft.md", "# plan v1")
    assert await files.read("draft.md") == "# plan v1" and await look.exists(key_of("# plan v1"))


async def test_a_text_written_or_read_once_is_read_again_from_memory_and_the_index_still_says_which(
    db: Database, stores: tuple[Blobs, Blobs], monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs, _ = stores
    gets: list[str] = []
    get_bytes = blobs.get_bytes

    async def counted(key: str, **kw: Any) -> bytes:
        gets.append(key)
        return await get_bytes(key, **kw)

    monkeypatch.setattr(blobs, "get_bytes", counted)
    repo = WorkerRuns()
    run_id = await running_run(db, repo)
    files = RunFiles(blobs, db, repo, run_id, 1, ContentCache())
    await files.write("plan.md", "# plan v1")
    assert await files.read("plan.md") == "# plan v1" and gets == []
    # A person's edit, written by a process that keeps nothing: the index row names the new content, so the
    # next read is of it, from the store once and from memory after.
    await RunFiles(blobs, db, repo, run_id, None).write("plan.md", "# plan, edited")
    assert await files.read("plan.md") == "# plan, edited" and gets == [key_of("# plan, edited")]
    assert await files.read("plan.md") == "# plan, edited" and len(gets) == 1
    # A text over the size kept is read from the store each time.
    small = RunFiles(blobs, db, repo, run_id, 1, ContentCache(largest=8))
    await small.write("draft.md", "# a draft over eight bytes")
    for _ in range(2):
        assert await small.read("draft.md") == "# a draft over eight bytes"
    assert gets[1:] == [key_of("# a draft over eight bytes")] * 2


@pytest.mark.parametrize("with_read", [False, True], ids=["a note", "a source read"])
async def test_a_content_let_go_between_the_put_and_the_index_is_stored_again(
    db: Database, stores: tuple[Blobs, Blobs], monkeypatch: pytest.MonkeyPatch, with_read: bool
) -> None:
    """A source's file is indexed in its read's transaction: the try that finds its content let go keeps
    neither, and the next keeps both, once."""
    blobs, look = stores
    repo = WorkerRuns()
    run_id = await running_run(db, repo)
    files = RunFiles(blobs, db, repo, run_id, 1)
    store, swept = files._store, []

    async def store_then_sweep(digest: str, data: bytes) -> int:
        generation = await store(digest, data)
        if not swept:  # the sweeper's turn comes right after the put, before the file's row
            swept.append(await sweeper(db, blobs).let_go_of_contents())
        return generation

    async def read_row(conn: asyncpg.Connection) -> bool:
        return await repo.append_ledger(conn, run_id=run_id, epoch=1, stage="read", ref=REF)

    monkeypatch.setattr(files, "_store", store_then_sweep)
    await files.write("notes/fundx.md", "Fund X meets redemptions.", with_record=read_row if with_read else None)
    assert swept == [1], "the sweeper did not let go of the content in between: the test proves nothing"
    assert await files.read("notes/fundx.md") == "Fund X meets redemptions."
    assert await look.exists(key_of("Fund X meets redemptions.")) and await refs(db, "Fund X meets redemptions.") == 1
    async with db.pool.acquire() as conn:
        attempts = await conn.fetchval("SELECT count(*) FROM ledger WHERE run_id = $1", run_id)
    assert attempts == (1 if with_read else 0)


async def test_a_lease_taken_over_between_a_read_and_its_file_keeps_neither(
    db: Database, stores: tuple[Blobs, Blobs]
) -> None:
    """The read's row is written under the lease; the lease passes to another attempt before the file's
    index row is: the file is fenced out, and the read rolls back with it."""
    blobs, _ = stores
    repo = WorkerRuns()
    run_id = await running_run(db, repo)
    files = RunFiles(blobs, db, repo, run_id, 1)

    async def read_then_taken_over(conn: asyncpg.Connection) -> bool:
        held = await repo.append_ledger(conn, run_id=run_id, epoch=1, stage="read", ref=REF)
        async with db.transaction() as other:
            await other.execute("UPDATE runs SET lease_epoch = 2 WHERE id = $1", run_id)
        return held

    with pytest.raises(StaleLease):
        await files.write("notes/report-a.md", "Report A.", with_record=read_then_taken_over)
    async with db.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM ledger WHERE run_id = $1", run_id) == 0
        assert await repo.get_file(conn, run_id=run_id, path="notes/report-a.md") is None
    assert await refs(db, "Report A.") == 0


async def test_files_stored_per_run_still_read_back_and_go_with_their_release(
    db: Database, stores: tuple[Blobs, Blobs]
) -> None:
    """A home from before the content store: its rows name `runs/<run>/<path>@<sha256>`."""
    blobs, look = stores
    repo = WorkerRuns()
    run_id = await running_run(db, repo)
    key = f"runs/{run_id}/draft.md@{sha('# old draft')}"
    await blobs.put_bytes(key, b"# old draft")
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO run_files (run_id, path, size, sha256, by_content) VALUES ($1, 'draft.md', 11, $2, false)",
            run_id,
            sha("# old draft"),
        )
    assert await RunFiles(blobs, db, repo, run_id, None).read("draft.md") == "# old draft"
    await end(db, run_id)
    assert (await sweeper(db, blobs).sweep_once()).released == 0, "released with retention unset (keep)"
    assert (await sweeper(db, blobs, run_retention_days=0).sweep_once()).released == 1
    assert not await look.exists(key)


async def test_an_ended_runs_journal_keeps_what_a_resume_needs(db: Database, stores: tuple[Blobs, Blobs]) -> None:
    blobs, _ = stores
    repo, journal = WorkerRuns(), JournalRepository()
    run_id = await running_run(db, repo)
    note = "Fund X met every redemption. " * 100
    response = {"name": "write_note", "arguments": {"source": "fundx", "text": note}, "call_id": "c1", "siblings": []}
    result = {
        "batch": [
            {
                "tool": "write_note",
                "arguments": {"source": "fundx", "text": note},
                "text": "wrote notes/fundx.md (2,900 chars)",
                "ok": True,
                "data": {"path": "notes/fundx.md", "items": [{"id": i} for i in range(50)]},
                "call_id": "c1",
            }
        ]
    }
    async with db.transaction() as conn:
        seq = await journal.insert_request(
            conn, run_id=run_id, epoch=1, request_id=f"{run_id}:r1", input_hash="h" * 64, response=response
        )
        assert seq is not None
        assert await journal.set_result(conn, run_id=run_id, epoch=1, seq=seq, result=result)
    assert (await sweeper(db, blobs).sweep_once()).trimmed == 0, "a running run's journal was trimmed"

    await end(db, run_id)
    assert (await sweeper(db, blobs).sweep_once()).trimmed == 1
    async with db.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT * FROM model_journal WHERE run_id = $1", run_id)
    kept = row["result"]["batch"][0]
    assert row["response"]["arguments"] == {"source": "fundx", "text": "[2,900 chars]"}
    assert kept["arguments"] == {"source": "fundx", "text": "[2,900 chars]"} and kept["data"] == {
        "path": "notes/fundx.md"
    }
    assert kept["text"] == "wrote notes/fundx.md (2,900 chars)" and kept["call_id"] == "c1"
    assert (row["request_id"], row["input_hash"], row["epoch"]) == (f"{run_id}:r1", "h" * 64, 1)
    assert trimmed_entry(row["response"], row["result"]) == (row["response"], row["result"])
    assert (await sweeper(db, blobs).sweep_once()).trimmed == 0

    assert (await sweeper(db, blobs, run_retention_days=0).sweep_once()).released == 1
    async with db.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM model_journal WHERE run_id = $1", run_id) == 0


async def test_a_journal_row_of_an_unknown_shape_is_kept_and_stops_nothing(
    db: Database, stores: tuple[Blobs, Blobs]
) -> None:
    blobs, _ = stores
    repo, journal = WorkerRuns(), JournalRepository()
    odd, later = await running_run(db, repo), await running_run(db, repo)
    async with db.transaction() as conn:
        for run_id in (odd, later):
            seq = await journal.insert_request(
                conn, run_id=run_id, epoch=1, request_id=f"{run_id}:r1", input_hash="h" * 64, response={"name": "x"}
            )
            assert seq is not None
            result = {"batch": [{"unexpected": 1}]} if run_id == odd else {"batch": []}
            assert await journal.set_result(conn, run_id=run_id, epoch=1, seq=seq, result=result)
    for run_id in (odd, later):
        await end(db, run_id)
    assert (await sweeper(db, blobs).sweep_once()).trimmed == 2
    async with db.pool.acquire() as conn:
        assert await conn.fetchval("SELECT result FROM model_journal WHERE run_id = $1", odd) == {
            "batch": [{"unexpected": 1}]
        }


async def test_an_ended_runs_ledger_is_sealed_and_reads_as_its_rows_did(
    db: Database, stores: tuple[Blobs, Blobs]
) -> None:
    blobs, _ = stores
    repo, journal = WorkerRuns(), JournalRepository()
    run_id, other = await running_run(db, repo), await running_run(db, repo)
    report = {"kind": "publication", "id": "pub_a", "version": 1}
    minutes = {"kind": "source", "id": "ic-minutes", "version": 2}
    withdrawn = {"kind": "publication", "id": "pub_w", "version": 3}
    rows: list[dict[str, Any]] = [
        {"stage": "listed", "ref": report},
        {"stage": "read", "ref": report, "content_hash": "c" * 64},
        {"stage": "read", "ref": minutes, "content_hash": "d" * 64, "locator": "docx:h=Investment committee – é"},
        {"stage": "included", "ref": minutes, "locator": "docx:h=Investment committee – é", "model_request": "r1"},
        {"stage": "included", "ref": withdrawn, "model_request": "r1"},
        {"stage": "unavailable", "ref": withdrawn, "reason": "withdrawn"},
        {"stage": "included", "ref": report, "model_request": f"{run_id}:r2"},
    ]
    async with db.transaction() as conn:
        for row in rows:
            assert await repo.append_ledger(conn, run_id=run_id, epoch=1, **row)
        assert await journal.append_replayed(conn, run_id=run_id, epoch=1, request_id="r3", input_hash="h" * 64)
        assert await repo.append_ledger(conn, run_id=other, epoch=1, stage="read", ref=report)

    async def views() -> tuple[Any, ...]:
        async with db.pool.acquire() as conn:
            whole = [dict(r) for r in await repo.list_ledger(conn, run_id=run_id)]
            first = [
                dict(r)
                for r in await ActorRuns(OWNER).page_ledger(conn, run_id=run_id, limit=3, after_id=0, after_seq=0)
            ]
            last = first[-1]
            rest = await ActorRuns(OWNER).page_ledger(
                conn, run_id=run_id, limit=100, after_id=last["id"], after_seq=last["seq"]
            )
            totals = await ActorRuns(OWNER).ledger_totals(conn, run_id=run_id)
            included = [r["ref"] for r in await repo.included_refs(conn, run_id=run_id)]
        return whole, first + [dict(r) for r in rest], totals, included

    live = await views()
    assert len(live[0]) == 8 and live[2] == {"listed": 1, "read": 2, "included": 3, "unavailable": 1, "replayed": 1}
    assert live[3] == [minutes, report]

    await end(db, run_id)
    assert (await sweeper(db, blobs).sweep_once()).trimmed == 1
    async with db.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM ledger WHERE run_id = $1", run_id) == 0
        assert await conn.fetchval("SELECT count(*) FROM ledger_sealed WHERE run_id = $1", run_id) == 1
        # The run still running keeps its rows, and an ended run's ledger takes no more.
        assert await conn.fetchval("SELECT count(*) FROM ledger WHERE run_id = $1", other) == 1
        assert not await repo.append_ledger(conn, run_id=run_id, epoch=1, stage="read", ref=minutes)
    assert await views() == live
    assert (await sweeper(db, blobs).sweep_once()).trimmed == 0
    assert await views() == live


async def test_an_ended_runs_file_index_is_sealed_keeps_its_contents_and_gives_them_back_on_release(
    db: Database, stores: tuple[Blobs, Blobs]
) -> None:
    blobs, look = stores
    repo = WorkerRuns()
    run_id, other = await running_run(db, repo), await running_run(db, repo)
    files = RunFiles(blobs, db, repo, run_id, 1)
    provenance = {"ref": {"kind": "source", "id": "fundx", "version": 1}, "content_hash": "c" * 64, "locator": "page:1"}
    await files.write("sources/fundx@v1-page_1.txt", PASSAGE, provenance=provenance)
    await files.write("plan.md", "# plan")
    await files.write("draft.md", "# plan")  # two names, one content
    await RunFiles(blobs, db, repo, other, 1).write("sources/fundx@v1-page_1.txt", PASSAGE)

    async def views(run: str) -> tuple[Any, ...]:
        reader = RunFiles(blobs, db, repo, run, None)
        async with db.pool.acquire() as conn:
            listed = [dict(r) for r in await repo.list_files(conn, run_id=run)]
            first, cursor = await ActorRuns(OWNER).page_files(conn, run_id=run, page=PageRequest(limit=2))
            rest, _ = await ActorRuns(OWNER).page_files(conn, run_id=run, page=PageRequest(limit=10, cursor=cursor))
        texts = {r["path"]: await reader.read(r["path"]) for r in listed}
        paged = [dict(r) for r in [*first, *rest]]
        return listed, paged, texts, await reader.provenance("sources/fundx@v1-page_1.txt")

    live = await views(run_id)
    assert [r["path"] for r in live[0]] == ["draft.md", "plan.md", "sources/fundx@v1-page_1.txt"]
    assert await files.entry("notes/fundx.md") is None
    assert live[3] == provenance
    assert (await refs(db, PASSAGE), await refs(db, "# plan")) == (2, 2)

    await end(db, run_id)
    assert (await sweeper(db, blobs).sweep_once()).trimmed == 1
    async with db.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM run_files WHERE run_id = $1", run_id) == 0
        assert await conn.fetchval("SELECT count(*) FROM run_files_sealed WHERE run_id = $1", run_id) == 1
    # Sealed, it reads the same, and its contents keep their references: nothing is let go.
    assert await views(run_id) == live
    assert await RunFiles(blobs, db, repo, run_id, None).entry("notes/fundx.md") is None
    assert (await refs(db, PASSAGE), await refs(db, "# plan")) == (2, 2)
    assert (await sweeper(db, blobs).sweep_once()).contents == 0 and await look.exists(key_of("# plan"))

    # A plan written after the seal (a person's edit that raced the run's end) is read before the sealed one.
    await RunFiles(blobs, db, repo, run_id, None).write("plan.md", "# plan, edited")
    assert await RunFiles(blobs, db, repo, run_id, None).read("plan.md") == "# plan, edited"
    listed = (await views(run_id))[0]
    assert [r["path"] for r in listed] == ["draft.md", "plan.md", "sources/fundx@v1-page_1.txt"]
    assert await refs(db, "# plan, edited") == 1

    # Released, the sealed index and the live row give their references back; what only it named goes.
    swept = await sweeper(db, blobs, run_retention_days=0).sweep_once()
    assert swept.released == 1 and swept.contents == 2
    assert (await refs(db, PASSAGE), await refs(db, "# plan"), await refs(db, "# plan, edited")) == (1, None, None)
    assert not await look.exists(key_of("# plan")) and await look.exists(key_of(PASSAGE))
    async with db.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM run_files_sealed WHERE run_id = $1", run_id) == 0
        assert await repo.list_files(conn, run_id=run_id) == []


async def test_a_listing_that_a_seal_commits_in_the_middle_of_still_lists_every_file(
    db: Database, stores: tuple[Blobs, Blobs], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The live rows are read first and the document after: a seal committing between the two reads leaves
    the document to read, never an empty listing."""
    blobs, _ = stores
    repo = WorkerRuns()
    run_id = await running_run(db, repo)
    files = RunFiles(blobs, db, repo, run_id, 1)
    for path in ("plan.md", "draft.md", "sources/fundx@v1-page_1.txt"):
        await files.write(path, f"# {path}")
    await end(db, run_id)
    page_of = Keyset.page

    async def page_then_seal(keyset: Keyset, *args: Any, **kw: Any) -> Any:
        found = await page_of(keyset, *args, **kw)
        await sweeper(db, blobs).trim_journals()  # the seal commits right after the live read
        return found

    monkeypatch.setattr(Keyset, "page", page_then_seal)
    async with db.pool.acquire() as conn:
        for _ in range(2):  # the live read before the seal, then one after it
            rows, _cursor = await ActorRuns(OWNER).page_files(conn, run_id=run_id, page=PageRequest(limit=10))
            assert [r["path"] for r in rows] == ["draft.md", "plan.md", "sources/fundx@v1-page_1.txt"]
