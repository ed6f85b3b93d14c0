"""The workspace repositories made for one scope read and change that scope's rows only: the rows that hang
off a workspace too (goal versions, associations, admissions, checkpoints, drifts), though they are fetched
by the workspace's id."""

from __future__ import annotations

import asyncpg

from services.workspace.app import MIGRATIONS
from services.workspace.catalog import PARTS
from services.workspace.drift_repository import DriftRepository
from services.workspace.repository import ScopedWorkspaceRepository, WorkspaceMaintenance, WorkspaceRepository
from shared.contracts.common import PageRequest
from shared.db import Database
from tests.support.databases import migrated_database

WS = "ws_b"
REF = {"kind": "source", "id": "src", "version": 1}


db = migrated_database("workspace", MIGRATIONS)


async def seed(conn: asyncpg.Connection, owner: ScopedWorkspaceRepository) -> None:
    """A workspace of scope B with one of every row that hangs off it."""
    await owner.insert_workspace(conn, id=WS, title="B's")
    await owner.insert_goal_version(conn, workspace_id=WS, version=1, text="goal")
    await owner.insert_association(
        conn, workspace_id=WS, kind="publication", ref_id="pub_1", version=1, run_id="run_1", title=None
    )
    await owner.insert_admission(conn, workspace_id=WS, run_id="run_1")
    await owner.insert_checkpoint(
        conn, workspace_id=WS, revision=1, summary="s", questions=[], derived_from={}, author="user"
    )
    await conn.execute("UPDATE associations SET backfill = true WHERE workspace_id = $1", WS)


async def snapshot(conn: asyncpg.Connection) -> list[list[asyncpg.Record]]:
    """Every row of scope B's workspace, to prove that nothing made for scope A changed any of them."""
    tables = ["workspaces", "goal_versions", "associations", "admissions", "checkpoint_revisions", "drifts"]
    return [await conn.fetch(f"SELECT * FROM {t} ORDER BY 1, 2") for t in tables]


async def test_a_workspace_repository_made_for_one_scope_never_reaches_another_scopes_rows(db: Database) -> None:
    repo = WorkspaceRepository()
    owner, stranger = repo.for_scope("scope_b"), repo.for_scope("scope_a")
    async with db.transaction() as conn:
        await seed(conn, owner)
        assert await owner.get_association(conn, workspace_id=WS, kind="publication", ref_id="pub_1") is not None
        before = await snapshot(conn)

        assert await stranger.find_workspace(conn, id=WS) is None
        assert await stranger.lock_workspace(conn, id=WS) is None
        assert await stranger.list_workspaces(conn, page=PageRequest()) == ([], None)
        assert await stranger.list_goal_versions(conn, id=WS, page=PageRequest()) == ([], None)
        assert await stranger.get_association(conn, workspace_id=WS, kind="publication", ref_id="pub_1") is None
        assert await stranger.catalog_state(conn, workspace_id=WS) is None
        for part in PARTS:
            kinds = ["publication", "source"]
            assert not await stranger.catalog_part(
                conn, workspace_id=WS, part=part, as_of=2**62, before=2**62, kinds=kinds, limit=9
            )
        assert not await stranger.catalog_holds(conn, workspace_id=WS, as_of=2**62, kind="publication", ref_id="pub_1")
        browse = {"kinds": ["publication"], "limit": 9, "before": 2**62, "title_holds": ""}
        assert await stranger.catalog_browse(conn, workspace_id=WS, **browse) == []
        assert await stranger.find_admission(conn, workspace_id=WS, run_id="run_1") is None
        assert await stranger.latest_checkpoint(conn, workspace_id=WS) is None
        assert await stranger.list_checkpoints(conn, workspace_id=WS, page=PageRequest()) == ([], None)

        await stranger.insert_goal_version(conn, workspace_id=WS, version=2, text="mine")
        await stranger.set_goal_version(conn, id=WS, version=2)
        await stranger.set_status(conn, id=WS, status="archived")
        assert (
            await stranger.insert_association(
                conn, workspace_id=WS, kind="source", ref_id="s", version=1, run_id=None, title=None
            )
            is None
        )
        await stranger.fill_title(conn, workspace_id=WS, kind="publication", ref_id="pub_1", title="mine")
        assert await stranger.supersede(conn, workspace_id=WS, by_seq=2**62, title=None, cited=["pub_1"]) == 0
        await stranger.settle_backfill(
            conn, workspace_id=WS, kind="publication", ref_id="pub_1", title="mine", report_of=None
        )
        await stranger.insert_admission(conn, workspace_id=WS, run_id="run_2")
        await stranger.insert_checkpoint(
            conn, workspace_id=WS, revision=2, summary="x", questions=[], derived_from={}, author="user"
        )
        await stranger.tombstone(conn, id=WS)
        assert await snapshot(conn) == before

        # The backfill's listing is the one read that crosses scopes, and says each row's scope.
        pending = await WorkspaceMaintenance().pending_backfill(conn, after=0, limit=9)
        assert [(r["workspace_id"], r["scope"]) for r in pending] == [(WS, "scope_b")]


async def test_a_drift_repository_made_for_one_scope_never_reaches_another_scopes_drifts(db: Database) -> None:
    drifts = DriftRepository()
    owner, stranger = drifts.for_scope("scope_b"), drifts.for_scope("scope_a")
    async with db.transaction() as conn:
        await seed(conn, WorkspaceRepository().for_scope("scope_b"))
        await owner.insert_citations(conn, pub_id="pub_1", pub_version=1, pub_title="Report", refs=[REF])
        drift = await owner.insert_drift(
            conn, workspace_id=WS, ref=REF, cited_by=[], new_version=2, reason="new_version"
        )
        assert drift is not None
        await owner.set_question(conn, seq=drift["seq"], question_id="q_1")

        assert (
            await stranger.insert_drift(
                conn, workspace_id=WS, ref=REF, cited_by=[], new_version=3, reason="new_version"
            )
            is None
        )
        await stranger.set_question(conn, seq=drift["seq"], question_id="q_mine")
        assert await stranger.list_drifts(conn, workspace_id=WS, page=PageRequest()) == ([], None)
        assert await stranger.drift_questions(conn, workspace_id=WS) == {}
        assert await stranger.citing_publications(conn, kind="source", ref_id="src") == []
        assert await stranger.titles(conn, workspace_id=WS, refs=[("publication", "pub_1")]) == {}

        page, _ = await owner.list_drifts(conn, workspace_id=WS, page=PageRequest())
        assert [(d["new_version"], d["question_id"]) for d in page] == [(2, "q_1")]
        assert list(await owner.drift_questions(conn, workspace_id=WS)) == ["q_1"]
        assert await owner.titles(conn, workspace_id=WS, refs=[("publication", "pub_1")]) == {
            ("publication", "pub_1"): "Report"
        }
