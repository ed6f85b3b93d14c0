"""The publication repository made for one scope reads and changes that scope's rows only: a version's and a
claim's rows too, though they are fetched by their publication's id."""

from __future__ import annotations

from services.publication.app import MIGRATIONS
from services.publication.repository import PublicationRepository
from shared.contracts.common import PageRequest
from shared.db import Database
from tests.support.databases import migrated_database

MARK = {"reason": "withdrawn"}


db = migrated_database("publication", MIGRATIONS)


async def test_a_repository_made_for_one_scope_never_reaches_another_scopes_rows(db: Database) -> None:
    repo = PublicationRepository()
    owner, stranger = repo.for_scope("scope_b"), repo.for_scope("scope_a")
    async with db.transaction() as conn:
        assert await owner.insert_publication(conn, id="pub_b", title="Fund X", workspace_id="ws_b", request_key="k")
        await owner.insert_version(
            conn, id="pub_b", version=1, title="Fund X", body="liquidity", content_hash="h", sources=[], run_id="run_b"
        )
        await owner.put_claim_stale(conn, id="pub_b", version=1, marks=[(0, MARK)])
        await owner.record_found(conn, run_id="run_b", ids=["pub_b"], versions=[1])

        # Reads: the parent, and the children by the parent's id.
        assert await stranger.get_publication(conn, id="pub_b") is None
        assert await stranger.lock_publication(conn, id="pub_b") is None
        assert await stranger.find_by_request_key(conn, request_key="k") is None
        assert await stranger.list_versions(conn, id="pub_b", page=PageRequest()) == ([], None)
        assert await stranger.get_version(conn, id="pub_b", version=1) is None
        assert await stranger.get_version(conn, id="pub_b", version=1, for_update=True) is None
        assert await stranger.check_versions(conn, ids=["pub_b", "pub_b"], versions=[1, None]) == []
        assert await stranger.claim_stale(conn, id="pub_b", version=1, indexes=[0]) == {}
        assert await stranger.search_workspace(conn, workspace_id="ws_b", q="liquidity", limit=5) == []
        assert not await stranger.was_found_by(conn, run_id="run_b", id="pub_b", version=1)
        assert await repo.read_versions(conn, [("scope_a", "pub_b", 1)]) == [None]
        assert [
            r is None for r in await repo.read_versions(conn, [("scope_a", "pub_b", 1), ("scope_b", "pub_b", 1)])
        ] == [
            True,
            False,
        ]

        # Changes: none of them touches the other scope's rows.
        await stranger.insert_version(
            conn, id="pub_b", version=2, title="X", body="x", content_hash="x", sources=[], run_id=None
        )
        await stranger.set_latest(conn, id="pub_b", version=2, title="X")
        await stranger.withdraw_version(conn, id="pub_b", version=1, reason="mine")
        await stranger.put_claim_stale(conn, id="pub_b", version=1, marks=[(1, MARK)])

        pub = await owner.get_publication(conn, id="pub_b")
        assert pub is not None and (pub["latest_version"], pub["title"]) == (1, "Fund X")
        versions, _ = await owner.list_versions(conn, id="pub_b", page=PageRequest())
        assert [(v["version"], v["status"]) for v in versions] == [(1, "active")]
        assert await owner.claim_stale(conn, id="pub_b", version=1, indexes=[0, 1]) == {0: MARK}
        assert await owner.was_found_by(conn, run_id="run_b", id="pub_b", version=1)
