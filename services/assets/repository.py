"""Every SQL statement of the assets service. Methods take the connection and never commit.

A repository is made for one scope (`AssetsRepository.for_scope`) and every statement it makes filters by
that scope: a source of another scope is as absent as a missing one. A version is joined to its source's
row and a passage or a run's search hit filtered by the scope it was recorded with, in the statement itself,
so a row fetched by its parent's key (a source's `pk`, a version's id) is checked by the query that reads
it. What the extraction lifecycle and its recovery sweep need whatever the scope is `AssetsMaintenance`,
which only they hold.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from shared.contracts.common import PageRequest
from shared.paging import Int32, Keyset

_VERSION = (
    "a.id AS asset_id, a.version, a.identity_key, a.root, a.content_hash, a.size, a.kind, a.filename,"
    " a.blob_bucket, a.blob_key, a.status, a.extraction, a.error, a.attempts, a.run_id, a.created_at,"
    " s.pk AS source_pk, s.scope, s.namespace, s.source_id, s.status AS source_status"
)
_FROM = " FROM asset_versions a JOIN sources s ON s.pk = a.source_pk"
# Advisory locks of this service live under their own first key, apart from the migration lock.
_CLAIM_SPACE = 3_000_001
# The identity key recomputed from the row itself: a row whose stored hash was altered fails it.
_INTACT = (
    "a.identity_key = encode(sha256(convert_to("
    "s.scope || '|' || a.root || '|' || s.source_id || '|' || a.content_hash, 'UTF8')), 'hex')"
)
# A source's versions and a version's passages, oldest and first in the document first.
VERSIONS = Keyset(("a.version",), (Int32,))
PASSAGES = Keyset(("ord",), (Int32,))
EVIDENCE_COLUMNS = ["id", "asset_id", "scope", "ord", "locator", "text", "text_hash", "lang", "ocr"]


class AssetsRepository:
    """Makes the repository of one scope; it holds no statement of its own."""

    def for_scope(self, scope: str) -> ScopedAssetsRepository:
        return ScopedAssetsRepository(scope)


class ScopedAssetsRepository:
    """The sources of one scope, their versions, their passages and its runs' search hits."""

    def __init__(self, scope: str):
        self.scope = scope

    async def lock_or_create_source(
        self, conn: asyncpg.Connection, *, namespace: str, source_id: str
    ) -> asyncpg.Record:
        await conn.execute(
            "INSERT INTO sources (scope, namespace, source_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            self.scope,
            namespace,
            source_id,
        )
        row = await self.find_source(conn, namespace=namespace, source_id=source_id, for_update=True)
        assert row is not None
        return row

    async def find_source(
        self, conn: asyncpg.Connection, *, namespace: str, source_id: str, for_update: bool = False
    ) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT pk, scope, namespace, source_id, status, latest_version FROM sources"
            " WHERE scope = $1 AND namespace = $2 AND source_id = $3" + (" FOR UPDATE" if for_update else ""),
            self.scope,
            namespace,
            source_id,
        )

    async def retire_source(self, conn: asyncpg.Connection, *, pk: int) -> list[int]:
        """Retire the source and every settled version; versions still extracting retire when they settle."""
        await conn.execute(
            "UPDATE sources SET status = 'retired', retired_at = now() WHERE pk = $1 AND scope = $2", pk, self.scope
        )
        rows = await conn.fetch(
            "UPDATE asset_versions a SET status = 'retired' FROM sources s WHERE s.pk = a.source_pk AND s.scope = $2"
            " AND a.source_pk = $1 AND a.status IN ('active', 'superseded', 'failed') RETURNING a.version",
            pk,
            self.scope,
        )
        return sorted(r["version"] for r in rows)

    # -- versions ------------------------------------------------------------------------------------

    async def find_by_identity(self, conn: asyncpg.Connection, *, identity_key: str) -> asyncpg.Record | None:
        return await conn.fetchrow(
            f"SELECT {_VERSION}{_FROM} WHERE a.identity_key = $1 AND s.scope = $2", identity_key, self.scope
        )

    async def insert_version(self, conn: asyncpg.Connection, *, source_pk: int, **values: Any) -> int | None:
        """Next version number of the (locked) source of the scope; returns it (None: no such source in the
        scope, and nothing is inserted)."""
        version = await conn.fetchval(
            "UPDATE sources SET latest_version = latest_version + 1 WHERE pk = $1 AND scope = $2 RETURNING latest_version",
            source_pk,
            self.scope,
        )
        if version is None:
            return None
        columns = ["source_pk", "version", *values]
        placeholders = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
        await conn.execute(
            f"INSERT INTO asset_versions ({', '.join(columns)}) VALUES ({placeholders})",
            source_pk,
            version,
            *values.values(),
        )
        return int(version)

    async def get_version(self, conn: asyncpg.Connection, *, asset_id: str) -> asyncpg.Record | None:
        return await conn.fetchrow(f"SELECT {_VERSION}{_FROM} WHERE a.id = $1 AND s.scope = $2", asset_id, self.scope)

    async def list_versions(
        self, conn: asyncpg.Connection, *, source_pk: int, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        return await VERSIONS.page(
            conn,
            f"SELECT {_VERSION}{_FROM} WHERE a.source_pk = $1 AND s.scope = $2",
            source_pk,
            self.scope,
            of=page,
        )

    async def active_version(self, conn: asyncpg.Connection, *, source_pk: int) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT a.id, a.version FROM asset_versions a JOIN sources s ON s.pk = a.source_pk AND s.scope = $2"
            " WHERE a.source_pk = $1 AND a.status = 'active'",
            source_pk,
            self.scope,
        )

    async def check_sources(
        self, conn: asyncpg.Connection, *, ids: list[str], versions: list[int | None]
    ) -> list[asyncpg.Record]:
        """One row per found ref. A null version means the active one, else the newest settled one."""
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT r.ord, s.source_id, s.status AS source_status, a.id AS asset_id, a.version, a.status,"
            f" a.content_hash, a.filename, a.created_at, a.run_id, {_INTACT} AS intact"
            " FROM unnest($2::text[], $3::int[]) WITH ORDINALITY AS r(id, version, ord)"
            " JOIN sources s ON s.scope = $1 AND s.namespace = '' AND s.source_id = r.id"
            " JOIN asset_versions a ON a.source_pk = s.pk AND a.version = COALESCE(r.version,"
            "  (SELECT x.version FROM asset_versions x WHERE x.source_pk = s.pk"
            "   ORDER BY x.status = 'active' DESC, x.status IN ('registered', 'extracting'), x.version DESC"
            "   LIMIT 1))",
            self.scope,
            ids,
            versions,
        )
        return rows

    # -- evidence ------------------------------------------------------------------------------------

    async def copy_evidence(self, conn: asyncpg.Connection, *, from_asset: str, to_asset: str, prefix: str) -> None:
        await conn.execute(
            "INSERT INTO evidence (id, asset_id, scope, ord, locator, text, text_hash, lang, ocr)"
            " SELECT $3 || ord, $2, scope, ord, locator, text, text_hash, lang, ocr FROM evidence"
            " WHERE asset_id = $1 AND scope = $4 AND EXISTS ("
            "  SELECT 1 FROM asset_versions a JOIN sources s ON s.pk = a.source_pk WHERE a.id = $2 AND s.scope = $4)",
            from_asset,
            to_asset,
            prefix,
            self.scope,
        )

    async def search_terms(
        self, conn: asyncpg.Connection, *, stop_config: str, configs: list[str], kinds: list[str], texts: list[str]
    ) -> list[asyncpg.Record]:
        """Each term as one tsquery: its stem in each of `configs` OR'ed (`simple`: the exact form).

        `stop` says the term is a stopword of `stop_config` (the query's own detected language). A term
        that normalises to nothing (punctuation) has a null `q`.
        """
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT (SELECT string_agg(DISTINCT '(' || z.q::text || ')', ' | ') FROM ("
            "  SELECT CASE WHEN u.k = 'prefix' THEN to_tsquery(c::regconfig, u.x || ':*')"
            "   ELSE phraseto_tsquery(c::regconfig, dossier_search_text(u.x)) END AS q"
            "  FROM unnest($2::text[]) AS c) z WHERE numnode(z.q) > 0) AS q,"
            " u.k <> 'prefix' AND numnode(phraseto_tsquery($1::regconfig, dossier_search_text(u.x))) = 0 AS stop"
            " FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS u(k, x, n) ORDER BY u.n",
            stop_config,
            configs,
            kinds,
            texts,
        )
        return rows

    async def search(
        self,
        conn: asyncpg.Connection,
        *,
        namespaces: list[str],
        terms: list[str],
        source_id: str | None,
        limit: int,
        max_snippet_words: int,
        candidates_per_term: int,
        scans: list[int | None] | None = None,
    ) -> list[asyncpg.Record]:
        """Passages of active versions matching ANY term, those matching more terms first.

        Each term contributes at most `candidates_per_term` passages (a rare term all of its passages, a
        very common one an arbitrary sample), so a question with common words costs the same as one
        without; the candidates are then ranked by how many terms they match, then by ts_rank.

        A term's sample comes from the full-text index, which hands over every passage holding the term
        before the first is read: for a term in a few percent of a million passages that is tens of
        thousands of entries (10-18 ms), growing with the store. Where `scans[i]` is a number, sample i
        (term i's; the last, with two terms or more, that of the passages matching every term) is first
        looked for among that many of the scope's active passages, read in order until enough match (a
        few thousand at most, whatever the store's size); only if they hold fewer than
        `candidates_per_term` does the index answer for it. The caller sets it for samples its statistics
        say are common (services/assets/evidence.py `sample_scans`); a wrong guess costs the scan, never a
        passage.

        Snippets are computed only for the rows returned, and `<`/`>` in the text become `‹`/`›` so the
        `<<`/`>>` highlight markers cannot be forged by a document.

        Runs inside a transaction: a prepared statement soon gets a generic plan, which cannot see how
        selective each tsquery is, so each search is planned for its own terms. A random page is costed
        as the cached or solid-state storage makes it (1.1) rather than PostgreSQL's default for spinning
        disks (4): with the default, a term found in a few percent of the passages was sampled by a
        sequential scan that read and decompressed thousands of passages' vectors to find its first 100,
        where the full-text index finds them at once (at 1,000,000 passages: search p99 57 ms → 33 ms at
        the database, the median unchanged; bench/ingest.py).
        """
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan; SET LOCAL random_page_cost = 1.1")
        params = [f"${7 + i}::tsquery" for i in range(len(terms))]
        active = (
            "e.asset_id IN (SELECT a.id FROM asset_versions a JOIN sources s ON s.pk = a.source_pk"
            " WHERE a.status = 'active' AND s.scope = $1 AND s.namespace = ANY($2::text[])"
            " AND ($3::text IS NULL OR s.source_id = $3))"
        )
        any_term = "(" + " || ".join(params) + ")"
        score = " + ".join(f"(e.tsv @@ {p})::int" for p in params) + f" + ts_rank(e.tsv, {any_term}, 32)"

        # One sample per term, and one of the passages matching every term (the best ones, which a
        # common word's sample could miss). Each scores its rows while it holds them.
        def indexed(match: str, unless: str = "") -> str:
            return (
                f"(SELECT e.id, {score} AS score FROM evidence e"
                f" WHERE e.scope = $1 AND e.tsv @@ {match} AND {active}{unless} LIMIT $6)"
            )

        matches = params if len(params) == 1 else [*params, "(" + " && ".join(params) + ")"]
        scanned: list[str] = []
        branches: list[str] = []
        for i, (match, scan) in enumerate(zip(matches, scans or [None] * len(matches), strict=True)):
            if scan is None:
                branches.append(indexed(match))
                continue
            scanned.append(
                f"scan{i} AS MATERIALIZED (SELECT e.id, {score} AS score FROM (SELECT e.id, e.tsv FROM evidence e"
                f" WHERE e.scope = $1 AND {active} LIMIT {int(scan)}) e WHERE e.tsv @@ {match} LIMIT $6)"
            )
            branches += [
                f"(SELECT id, score FROM scan{i})",
                indexed(match, f" AND (SELECT count(*) FROM scan{i}) < $6"),
            ]
        sql = (
            f"WITH {''.join(c + ', ' for c in scanned)}cand AS ({' UNION '.join(branches)}),"
            " top AS (SELECT id, max(score) AS score FROM cand GROUP BY id ORDER BY score DESC, id LIMIT $4)"
            " SELECT e.id AS evidence_id, e.asset_id, s.source_id, a.version, e.locator, e.ocr, top.score,"
            "  ts_headline(e.lang::regconfig, dossier_search_text(translate(e.text, '<>', '‹›')),"
            f"   {any_term}, 'MaxFragments=2, MaxWords=' || $5::int || ', MinWords=5, StartSel=<<, StopSel=>>')"
            "  AS snippet"
            " FROM top JOIN evidence e ON e.id = top.id"
            " JOIN asset_versions a ON a.id = e.asset_id JOIN sources s ON s.pk = a.source_pk"
            " ORDER BY top.score DESC, e.id"
        )
        rows: list[asyncpg.Record] = await conn.fetch(
            sql, self.scope, namespaces, source_id, limit, max_snippet_words, candidates_per_term, *terms
        )
        return rows

    async def record_hits(self, conn: asyncpg.Connection, *, run_id: str, evidence_ids: list[str]) -> None:
        await conn.execute(
            "INSERT INTO run_evidence_hits (run_id, evidence_id, scope)"
            " SELECT $1, unnest($3::text[]), $2 ON CONFLICT DO NOTHING",
            run_id,
            self.scope,
            evidence_ids,
        )

    async def was_found_by(self, conn: asyncpg.Connection, *, run_id: str, evidence_id: str) -> bool:
        return bool(
            await conn.fetchval(
                "SELECT 1 FROM run_evidence_hits WHERE run_id = $1 AND evidence_id = $2 AND scope = $3",
                run_id,
                evidence_id,
                self.scope,
            )
        )

    async def find_evidence_id(
        self, conn: asyncpg.Connection, *, source_id: str, version: int, locator: str
    ) -> str | None:
        """The scope's own (not run-local) passage at this locator of this source version."""
        value = await conn.fetchval(
            "SELECT e.id FROM evidence e JOIN asset_versions a ON a.id = e.asset_id JOIN sources s ON s.pk = a.source_pk"
            " WHERE s.scope = $1 AND s.namespace = '' AND s.source_id = $2 AND a.version = $3 AND e.locator = $4"
            " AND e.scope = $1 ORDER BY e.ord LIMIT 1",
            self.scope,
            source_id,
            version,
            locator,
        )
        return str(value) if value is not None else None

    async def find_version(self, conn: asyncpg.Connection, *, source_id: str, version: int) -> asyncpg.Record | None:
        """The scope's own (not run-local) version of a source, with whether its row is intact."""
        return await conn.fetchrow(
            f"SELECT {_VERSION}, {_INTACT} AS intact{_FROM}"
            " WHERE s.scope = $1 AND s.namespace = '' AND s.source_id = $2 AND a.version = $3",
            self.scope,
            source_id,
            version,
        )

    async def page_passages(
        self, conn: asyncpg.Connection, *, asset_id: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        return await PASSAGES.page(
            conn,
            "SELECT id AS evidence_id, ord, locator, text, text_hash, ocr FROM evidence WHERE asset_id = $1 AND scope = $2",
            asset_id,
            self.scope,
            of=page,
        )

    async def get_evidence(self, conn: asyncpg.Connection, *, evidence_id: str) -> asyncpg.Record | None:
        return await conn.fetchrow(
            f"SELECT e.id AS evidence_id, e.locator, e.text, e.text_hash, e.ocr, {_VERSION}, {_INTACT} AS intact"
            " FROM evidence e JOIN asset_versions a ON a.id = e.asset_id JOIN sources s ON s.pk = a.source_pk"
            " WHERE e.id = $1 AND e.scope = $2 AND s.scope = $2",
            evidence_id,
            self.scope,
        )


async def index_statistics(conn: asyncpg.Connection) -> tuple[float, dict[str, float]]:
    """The planner's statistics of the passages' full-text index, across scopes: about how many passages
    there are, and for the lexemes most common among them the share of passages holding each. They choose
    how a search samples a term (ScopedAssetsRepository.search); they are never answered to anyone."""
    row = await conn.fetchrow(
        "SELECT greatest(c.reltuples, 0)::float8 AS passages, s.most_common_elems::text::text[] AS lexemes,"
        " s.most_common_elem_freqs AS shares FROM pg_class c LEFT JOIN pg_stats s"
        " ON s.schemaname = current_schema() AND s.tablename = 'evidence' AND s.attname = 'tsv'"
        " WHERE c.oid = 'evidence'::regclass"
    )
    # Not analyzed yet: no lexemes. The shares list ends with three figures of its own (least and greatest
    # share, nulls): zip stops before them.
    return float(row["passages"]), dict(zip(row["lexemes"] or [], row["shares"] or [], strict=False))


class AssetsMaintenance:
    """What the extraction lifecycle and its recovery sweep do to a version whatever its scope: claim it,
    extract it, settle it. A version reaches them by its id, from a request that registered it in its scope
    or from the sweep of unfinished versions; its passages take the version's own scope."""

    async def get_version(self, conn: asyncpg.Connection, *, asset_id: str) -> asyncpg.Record | None:
        return await conn.fetchrow(f"SELECT {_VERSION}{_FROM} WHERE a.id = $1", asset_id)

    async def lock_source(self, conn: asyncpg.Connection, *, pk: int) -> asyncpg.Record:
        row = await conn.fetchrow("SELECT pk, status, latest_version FROM sources WHERE pk = $1 FOR UPDATE", pk)
        assert row is not None
        return row

    async def active_version(self, conn: asyncpg.Connection, *, source_pk: int) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT id, version FROM asset_versions WHERE source_pk = $1 AND status = 'active'", source_pk
        )

    async def has_evidence(self, conn: asyncpg.Connection, *, asset_id: str) -> bool:
        return bool(await conn.fetchval("SELECT EXISTS (SELECT 1 FROM evidence WHERE asset_id = $1)", asset_id))

    async def mark_extracting(self, conn: asyncpg.Connection, *, asset_id: str) -> int:
        return int(
            await conn.fetchval(
                "UPDATE asset_versions SET status = 'extracting', attempts = attempts + 1"
                " WHERE id = $1 RETURNING attempts",
                asset_id,
            )
        )

    async def settle(
        self,
        conn: asyncpg.Connection,
        *,
        asset_id: str,
        status: str,
        extraction: dict[str, Any] | None,
        error: str | None,
    ) -> None:
        await conn.execute(
            "UPDATE asset_versions SET status = $2, extraction = $3, error = $4, settled_at = now() WHERE id = $1",
            asset_id,
            status,
            extraction,
            error,
        )

    async def set_status(self, conn: asyncpg.Connection, *, asset_id: str, status: str) -> None:
        await conn.execute("UPDATE asset_versions SET status = $2 WHERE id = $1", asset_id, status)

    async def unfinished(self, conn: asyncpg.Connection, *, limit: int) -> list[str]:
        rows = await conn.fetch(
            "SELECT id FROM asset_versions WHERE status IN ('registered', 'extracting') ORDER BY created_at LIMIT $1",
            limit,
        )
        return [r["id"] for r in rows]

    # A version being ingested is claimed by a session-level advisory lock held on the ingesting
    # connection: if the process dies, PostgreSQL drops the connection and the claim with it.
    async def claim(self, conn: asyncpg.Connection, *, asset_id: str) -> None:
        await conn.execute("SELECT pg_advisory_lock($1, hashtext($2))", _CLAIM_SPACE, asset_id)

    async def try_claim(self, conn: asyncpg.Connection, *, asset_id: str) -> bool:
        return bool(await conn.fetchval("SELECT pg_try_advisory_lock($1, hashtext($2))", _CLAIM_SPACE, asset_id))

    async def release(self, conn: asyncpg.Connection, *, asset_id: str) -> None:
        await conn.execute("SELECT pg_advisory_unlock($1, hashtext($2))", _CLAIM_SPACE, asset_id)

    async def insert_evidence(self, conn: asyncpg.Connection, *, rows: list[tuple[Any, ...]]) -> None:
        await conn.copy_records_to_table("evidence", records=rows, columns=EVIDENCE_COLUMNS)
