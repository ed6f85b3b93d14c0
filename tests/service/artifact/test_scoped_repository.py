"""The artifact repository made for one scope reads and changes that scope's rows only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.artifact.app import MIGRATIONS
from services.artifact.repository import ArtifactRepository
from shared.blobs import content_key
from shared.db import Database
from tests.support.databases import migrated_database

SHA = "ab" * 32


db = migrated_database("artifact", MIGRATIONS)


async def test_a_repository_made_for_one_scope_never_reaches_another_scopes_artifact(db: Database) -> None:
    repo = ArtifactRepository()
    owner, stranger = repo.for_scope("scope_b"), repo.for_scope("scope_a")
    soon = datetime.now(UTC) + timedelta(days=1)
    async with db.transaction() as conn:
        row = await owner.insert_artifact(
            conn,
            id="art_b",
            title="B's",
            media_type="text/html",
            size=1,
            content_hash=SHA,
            bucket="b",
            object_key=content_key(SHA),
            expires_at=soon,
        )
        assert row["id"] == "art_b"

        assert await stranger.get_artifact(conn, id="art_b") is None
        assert await stranger.get_artifact(conn, id="art_b", for_update=True) is None
        assert await stranger.retain(conn, id="art_b", expires_at=None) is None
        assert await stranger.check_artifacts(conn, ids=["art_b"]) == []

        kept = await owner.get_artifact(conn, id="art_b")
        assert kept is not None and kept["retained_at"] is None and kept["expires_at"] == soon
        assert [r["id"] for r in await owner.check_artifacts(conn, ids=["art_b"])] == ["art_b"]
