"""Evidence search quality: any word may match and more matched words rank higher, phrases, prefixes,
stopwords, highlighted snippets with markers a document cannot forge, language-aware stemming (Latin,
Cyrillic, Arabic scripts) and CJK text, and rows that existed before the migration stay searchable."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import asyncpg

from services.assets import evidence as evidence_module
from services.assets import language
from services.assets.evidence import EvidenceService, sample_scans
from services.assets.repository import AssetsRepository, index_statistics
from shared.bus import RequestContext
from shared.contracts import assets as c
from shared.contracts.common import Actor
from shared.db import Database, ensure_database, migrate
from tests.service.assets.conftest import AssetsUnderTest, actor
from tests.support.infra import Infra

MIGRATIONS = Path(evidence_module.__file__).parent / "migrations"

PARAGRAPHS = [
    "Liquidity gates were activated during the stress.",  # l=1
    "Liquidity remained ample all year.",  # l=3
    "Swing pricing was applied twice.",  # l=5
    "The board activated the gates.",  # l=7
    "A <<forged>> marker and <b>bold</b> markup.",  # l=9
    "The fund reported several redemptions in March.",  # l=11
]


async def search(assets: AssetsUnderTest, who: Actor, q: str, **extra: Any) -> list[dict[str, Any]]:
    reply = await assets.bus.call_raw(c.SEARCH, {"q": q, **extra}, actor=who)
    items: list[dict[str, Any]] = reply["items"]
    return items


async def upload_paragraphs(assets: AssetsUnderTest, who: Actor, source_id: str, paragraphs: list[str]) -> None:
    v = await assets.upload(who, source_id, "\n\n".join(paragraphs).encode())
    assert v["status"] == "active", v


async def test_any_word_matches_and_more_matched_words_rank_higher(assets: AssetsUnderTest) -> None:
    who = actor()
    await upload_paragraphs(assets, who, "notes", PARAGRAPHS)
    hits = await search(assets, who, "liquidity gates swaps")
    # Two words (l=1) before one (l=3 liquidity, l=7 gates); the third word is in no passage at all.
    assert hits[0]["locator"] == "text:l=1-1"
    assert {h["locator"] for h in hits[1:]} == {"text:l=3-3", "text:l=7-7"}
    assert hits[0]["score"] > hits[1]["score"]
    assert "<<Liquidity>>" in hits[0]["snippet"] and "<<gates>>" in hits[0]["snippet"]


async def test_phrases_prefixes_and_stopwords(assets: AssetsUnderTest) -> None:
    who = actor()
    await upload_paragraphs(assets, who, "notes", PARAGRAPHS)
    assert [h["locator"] for h in await search(assets, who, '"gates were activated"')] == ["text:l=1-1"]
    assert [h["locator"] for h in await search(assets, who, '"activated the gates"')] == ["text:l=7-7"]
    assert {h["locator"] for h in await search(assets, who, "liqu*")} == {"text:l=1-1", "text:l=3-3"}
    # "the" is dropped beside a word that matters: it would otherwise match most passages.
    assert {h["locator"] for h in await search(assets, who, "the gates")} == {"text:l=1-1", "text:l=7-7"}
    # A language's stopwords are not in its passages' index: alone, "the" finds nothing (and fails nothing).
    assert await search(assets, who, "the") == []
    # Stemming: the singular finds the plural.
    assert [h["locator"] for h in await search(assets, who, "redemption")] == ["text:l=11-11"]


async def test_a_document_cannot_forge_the_highlight_markers(assets: AssetsUnderTest) -> None:
    who = actor()
    await upload_paragraphs(assets, who, "notes", PARAGRAPHS)
    [hit] = await search(assets, who, "marker")
    snippet = hit["snippet"]
    assert "forged›› <<marker>> and ‹b›bold‹/b›" in snippet
    assert (snippet.count("<<"), snippet.count(">>"), snippet.count("<"), snippet.count(">")) == (1, 1, 2, 2)


async def test_language_aware_stemming_and_cjk(assets: AssetsUnderTest) -> None:
    who = actor()
    texts = {
        "ru": "Календарь знаменательных и памятных дат на 2017 год.",
        "de": "Die Anleger warteten auf die Rückzahlung ihrer Fonds und der Markt war nicht ruhig.",
        "ar": "اللغة العربية هي واحدة من أكثر اللغات انتشارا في العالم",
        "zh": "中华人民共和国成立于一九四九年十月一日。",
        "ko": "한국어 문서에서 검색이 됩니다",
        "ja": "東京都の銀行は営業を再開した",
    }
    for source_id, text in texts.items():
        await upload_paragraphs(assets, who, source_id, [text])
    async with assets.db() as conn:
        langs = dict(await conn.fetch("SELECT locator || ':' || text, lang FROM evidence WHERE scope = $1", who.scope))
    assert sorted(langs.values()) == sorted(["russian", "german", "arabic", "simple", "simple", "simple"])
    for q, source_id in [
        ("календаря", "ru"),  # another case of the same noun: the Russian stemmer
        ("Anlegern", "de"),  # a German inflection, although a one-word question shows no language
        ("اللغات", "ar"),
        ("共和国", "zh"),  # inside a run of characters with no spaces
        ("检索 共和国", "zh"),  # OR: one matching word is enough
        ("검색", "ko"),
        ("銀行", "ja"),
    ]:
        hits = await search(assets, who, q)
        assert [h["source_id"] for h in hits] == [source_id], q
    [hit] = await search(assets, who, "共和国")
    assert "<<共和国>>" in hit["snippet"]  # one highlight, without the spaces the index put between characters


async def test_every_language_the_parser_may_name_exists_in_postgres(assets: AssetsUnderTest) -> None:
    async with assets.db() as conn:
        names = {r["cfgname"] for r in await conn.fetch("SELECT cfgname FROM pg_ts_config")}
    assert language.CONFIGS <= names


async def test_new_passages_are_merged_into_the_index_as_they_are_stored(assets: AssetsUnderTest) -> None:
    # Every search scans the whole pending list of the index; a small limit keeps it to about one upload.
    async with assets.db() as conn:
        options = await conn.fetchval("SELECT reloptions FROM pg_class WHERE relname = 'evidence_tsv'")
    assert "gin_pending_list_limit=256" in options


async def test_rows_from_before_the_migration_stay_searchable(infra: Infra, tmp_path: Path) -> None:
    dsn = infra.dsn(f"assets_{uuid.uuid4().hex[:10]}")
    await ensure_database(dsn)
    # The schema as it was: only the first migration, under the name the real directory gives it.
    old = tmp_path / "assets" / "migrations"
    old.mkdir(parents=True)
    shutil.copy(MIGRATIONS / "0001_init.sql", old / "0001_init.sql")
    db = Database(dsn)
    await db.connect()
    try:
        assert await migrate(db.pool, old) == ["assets/0001_init.sql"]
        async with db.pool.acquire() as conn:
            await insert_old_passage(conn, "Redemptions were gated in March.")
        assert await migrate(db.pool, MIGRATIONS) == [
            "assets/0002_language_search.sql",
            "assets/0003_search_pending_list.sql",
        ]
        service = EvidenceService(db, _NoGrants(), AssetsRepository())  # type: ignore[arg-type]
        ctx = RequestContext(actor=Actor(scope="old", principal="p"), grant=None, subject=c.SEARCH, issuer="gateway")
        reply = await service.search(ctx, c.SearchRequest(q="redemption gate"))
        assert [(h.locator, h.ocr) for h in reply.items] == [("page:1", False)]
        assert "<<Redemptions>>" in reply.items[0].snippet
    finally:
        await db.close()


class _NoGrants:
    def claims(self, actor: Actor, grant: str | None) -> None:
        return None


async def insert_old_passage(conn: asyncpg.Connection, text: str) -> None:
    pk = await conn.fetchval(
        "INSERT INTO sources (scope, source_id, latest_version) VALUES ('old', 'o', 1) RETURNING pk"
    )
    await conn.execute(
        "INSERT INTO asset_versions (id, source_pk, version, identity_key, root, content_hash, size, kind,"
        " blob_bucket, blob_key, status) VALUES ('ast_old', $1, 1, 'k', 'upload', 'h', 1, 'pdf', 'b', 'k', 'active')",
        pk,
    )
    await conn.execute(
        "INSERT INTO evidence (id, asset_id, scope, ord, locator, text, text_hash)"
        " VALUES ('ev_old_1', 'ast_old', 'old', 1, 'page:1', $1, 'x')",
        text,
    )


async def insert_version(
    conn: asyncpg.Connection, scope: str, source_id: str, texts: list[str], status: str = "active"
) -> None:
    pk = await conn.fetchval(
        "INSERT INTO sources (scope, source_id, latest_version) VALUES ($1, $2, 1) RETURNING pk", scope, source_id
    )
    asset_id = f"ast_{uuid.uuid4().hex}"
    await conn.execute(
        "INSERT INTO asset_versions (id, source_pk, version, identity_key, root, content_hash, size, kind,"
        " blob_bucket, blob_key, status) VALUES ($1, $2, 1, $1, 'upload', 'h', 1, 'text', 'b', 'k', $3)",
        asset_id,
        pk,
        status,
    )
    await conn.copy_records_to_table(
        "evidence",
        records=[
            (f"ev_{asset_id[4:20]}_{n}", asset_id, scope, n, f"text:l={n}-{n}", text, "h", "english")
            for n, text in enumerate(texts)
        ],
        columns=["id", "asset_id", "scope", "ord", "locator", "text", "text_hash", "lang"],
    )


async def test_a_common_words_sample_is_scanned_for_and_the_index_answers_what_the_scan_missed(
    infra: Infra,
) -> None:
    """A word in nearly every passage of the store (another scope's) is looked for by scanning the scope's own
    passages (services/assets/evidence.py `sample_scans`); where the scan finds fewer than a sample, the
    index answers: the scope's three passages with the word, past the scan, are all found, and a superseded
    version full of it, another source and another scope never are."""
    dsn = infra.dsn(f"assets_{uuid.uuid4().hex[:10]}")
    await ensure_database(dsn)
    db = Database(dsn)
    await db.connect()
    try:
        await migrate(db.pool, MIGRATIONS)
        async with db.pool.acquire() as conn:
            crowd = [f"zorblat ledger entry {n}" + (" quux" if n % 2 else "") for n in range(4000)]
            await insert_version(conn, "crowd", "ledger", crowd)
            mine = [f"minutes of meeting {n} about fees" for n in range(1000)]
            for n in (990, 991, 992):
                mine[n] = f"the zorblat was noted in meeting {n}" + (" with quux" if n == 991 else "")
            await insert_version(conn, "me", "minutes", mine)
            await insert_version(conn, "me", "superseded", [f"zorblat {n}" for n in range(300)], status="superseded")
            await insert_version(conn, "me", "other", ["nothing of note"])
            await conn.execute("ANALYZE evidence")
            passages, shares = await index_statistics(conn)
            [zorblat] = [
                t["q"]
                for t in await AssetsRepository()
                .for_scope("me")
                .search_terms(conn, stop_config="english", configs=["english"], kinds=["word"], texts=["zorblat"])
            ]
        # The statistics make the word common enough to be scanned for, in a few hundred passages.
        [scan] = sample_scans([zorblat], passages, shares, evidence_module.CANDIDATES_PER_TERM)
        assert scan is not None and scan < 990, (scan, passages)

        service = EvidenceService(db, _NoGrants(), AssetsRepository())  # type: ignore[arg-type]

        async def search(scope: str, q: str, **extra: Any) -> list[str]:
            ctx = RequestContext(
                actor=Actor(scope=scope, principal="p"), grant=None, subject=c.SEARCH, issuer="gateway"
            )
            reply = await service.search(ctx, c.SearchRequest(q=q, **extra))
            return [h.locator for h in reply.items]

        found = await search("me", "zorblat")
        assert sorted(found) == ["text:l=990-990", "text:l=991-991", "text:l=992-992"]
        assert (await search("me", "zorblat quux"))[0] == "text:l=991-991"
        assert await search("me", "zorblat", source_id="other") == []
        # In the scope where the word is everywhere the scan's sample is the answer, the same every time.
        crowded = await search("crowd", "zorblat quux", limit=10)
        assert len(crowded) == 10 and crowded == await search("crowd", "zorblat quux", limit=10)
        assert all(int(loc.split("=")[1].split("-")[0]) % 2 for loc in crowded)
    finally:
        await db.close()
