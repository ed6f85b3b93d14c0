"""The assets repository made for one scope reads and changes that scope's rows only: a source's versions and a
version's passages too, though they are fetched by the source's key or the version's id."""

from __future__ import annotations

import asyncpg

from services.assets.app import MIGRATIONS
from services.assets.repository import AssetsMaintenance, AssetsRepository, ScopedAssetsRepository
from services.assets.service import identity_key
from shared.contracts.common import PageRequest
from shared.db import Database
from tests.support.databases import migrated_database

db = migrated_database("assets", MIGRATIONS)
IDENTITY = identity_key("scope_b", "upload", "fund-x", "ab" * 32)
FILE = {"root": "upload", "size": 10, "kind": "text", "filename": "fund-x.txt", "blob_bucket": "b", "blob_key": "k"}


async def seed(conn: asyncpg.Connection, owner: ScopedAssetsRepository) -> int:
    """Scope B's source with one active version, its passage and a run's hit of it; the source's key."""
    source = await owner.lock_or_create_source(conn, namespace="", source_id="fund-x")
    version = await owner.insert_version(
        conn, source_pk=source["pk"], id="ast_b", identity_key=IDENTITY, content_hash="ab" * 32, **FILE
    )
    assert version == 1
    await AssetsMaintenance().set_status(conn, asset_id="ast_b", status="active")
    await AssetsMaintenance().insert_evidence(
        conn, rows=[("ev_b", "ast_b", "scope_b", 0, "page:1", "gated redemptions", "h", "english", False)]
    )
    await owner.record_hits(conn, run_id="run_b", evidence_ids=["ev_b"])
    return int(source["pk"])


async def test_a_repository_made_for_one_scope_never_reaches_another_scopes_sources(db: Database) -> None:
    repo = AssetsRepository()
    owner, stranger = repo.for_scope("scope_b"), repo.for_scope("scope_a")
    async with db.transaction() as conn:
        pk = await seed(conn, owner)

        assert await stranger.find_source(conn, namespace="", source_id="fund-x") is None
        assert await stranger.find_by_identity(conn, identity_key=IDENTITY) is None
        assert await stranger.get_version(conn, asset_id="ast_b") is None
        assert await stranger.list_versions(conn, source_pk=pk, page=PageRequest()) == ([], None)
        assert await stranger.active_version(conn, source_pk=pk) is None
        assert await stranger.check_sources(conn, ids=["fund-x", "fund-x"], versions=[1, None]) == []
        assert await stranger.find_version(conn, source_id="fund-x", version=1) is None
        assert await stranger.find_evidence_id(conn, source_id="fund-x", version=1, locator="page:1") is None
        assert await stranger.get_evidence(conn, evidence_id="ev_b") is None
        assert await stranger.page_passages(conn, asset_id="ast_b", page=PageRequest()) == ([], None)
        assert not await stranger.was_found_by(conn, run_id="run_b", evidence_id="ev_b")
        [term] = await stranger.search_terms(
            conn, stop_config="english", configs=["english"], kinds=["word"], texts=["gated"]
        )
        search = {"namespaces": [""], "source_id": None, "limit": 5, "max_snippet_words": 10, "candidates_per_term": 10}
        assert await stranger.search(conn, terms=[term["q"]], **search) == []
        assert len(await owner.search(conn, terms=[term["q"]], **search)) == 1

        # Changes through the other scope's keys touch nothing.
        assert (
            await stranger.insert_version(
                conn, source_pk=pk, id="ast_a", identity_key="x", content_hash="cd" * 32, **FILE
            )
            is None
        )
        await stranger.copy_evidence(conn, from_asset="ast_b", to_asset="ast_b", prefix="copy_")
        assert await stranger.retire_source(conn, pk=pk) == []

        source = await owner.find_source(conn, namespace="", source_id="fund-x")
        assert source is not None and (source["status"], source["latest_version"]) == ("open", 1)
        versions, _ = await owner.list_versions(conn, source_pk=pk, page=PageRequest())
        assert [(v["asset_id"], v["status"]) for v in versions] == [("ast_b", "active")]
        passages, _ = await owner.page_passages(conn, asset_id="ast_b", page=PageRequest())
        assert [p["evidence_id"] for p in passages] == ["ev_b"]
        assert await owner.was_found_by(conn, run_id="run_b", evidence_id="ev_b")
