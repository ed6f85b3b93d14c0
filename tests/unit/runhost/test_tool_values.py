"""A tool answers with the contract model it built (`ToolResult.value`) beside its JSON (`data`, what the loop,
the journal and the policies read): the JSON holds what the model holds, and the journal keeps the JSON only."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from services.runhost.policies.vocabulary import ToolCall
from services.runhost.tools import CATALOG_FILE, ToolBox
from shared.contracts.common import Ref
from shared.contracts.runhost import SourceRead
from shared.contracts.workspace import Catalog, CatalogItem
from shared.errors import NotFound


class Files:
    """A run's working files in memory, with the provenance each source copy was written with."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.provs: dict[str, dict[str, Any]] = {}

    async def listing(self) -> dict[str, int]:
        return {path: len(text) for path, text in self.texts.items()}

    async def write(self, path: str, text: str, provenance: Any = None, with_record: Any = None) -> None:
        self.texts[path] = text
        if provenance is not None:
            self.provs[path] = provenance
        if with_record is not None:
            await with_record(None)

    async def entry(self, path: str) -> dict[str, Any] | None:
        """The index row as services/runhost/memory.py reads it: the provenance a copy was written with."""
        if path not in self.texts:
            return None
        return {"path": path, "ref": None, "content_hash": None, "locator": None} | self.provs.get(path, {})

    async def text(self, path: str, row: dict[str, Any]) -> str:
        return self.texts[path]

    async def read_indexed(self, path: str) -> tuple[str, dict[str, Any]]:
        row = await self.entry(path)
        if row is None:
            raise NotFound("no such file in this run")
        return self.texts[path], row


class Ledger:
    def __init__(self) -> None:
        self.rows: list[tuple[str, Ref]] = []

    async def listed_all(self, items: list[tuple[Ref, str | None]]) -> None:
        self.rows.extend(("listed", ref) for ref, _ in items)

    async def append_in(self, conn: Any, stage: str, ref: Ref, **fields: Any) -> bool:
        self.rows.append((stage, ref))
        return True

    def read_row(self, ref: Ref, content_hash: str | None, locator: str | None) -> Any:
        async def record(conn: Any) -> bool:
            return await self.append_in(conn, "read", ref, content_hash=content_hash, locator=locator)

        return record


class Owners:
    def __init__(self, body: Any = None) -> None:
        self.body = body

    async def read_publication_for_run(self, actor: Any, grant: str, *, id: str, version: int) -> Any:
        if self.body is None:
            raise NotFound("no such publication")
        return self.body

    async def check_publications(self, actor: Any, refs: list[Ref]) -> list[Any]:
        """Every version read is still usable."""
        return [SimpleNamespace(ref=ref, available=True, reason=None) for ref in refs]


def toolbox(catalog: Catalog, owners: Owners) -> tuple[ToolBox, Files]:
    files = Files()
    box = ToolBox(
        actor=None,  # type: ignore[arg-type]
        grant="g",
        catalog=catalog,
        files=files,  # type: ignore[arg-type]
        ledger=Ledger(),  # type: ignore[arg-type]
        owners=owners,  # type: ignore[arg-type]
    )
    return box, files


EMPTY = Catalog(items=[], complete=True, omitted=0)


async def test_the_catalog_tool_answers_the_page_as_admitted() -> None:
    item = CatalogItem.model_validate(
        {
            "kind": "publication",
            "id": "pub_a",
            "version": 2,
            "title": "A",
            "created_at": "2026-01-01T00:00:00Z",
            "available": True,
            "reason": None,
            "run_id": None,
        }
    )
    page = Catalog(items=[item], complete=False, omitted=3, next_cursor="c2")
    box, files = toolbox(page, Owners())
    result, _ = await box.execute(ToolCall("list_catalog", {}, call_id="c1"))
    assert result.value_as(Catalog) is page
    assert result.data == page.model_dump(mode="json") | {"path": CATALOG_FILE}
    assert CATALOG_FILE in files.texts
    assert "value" not in result.record() and result.record()["data"] == result.data


async def test_a_read_answers_its_copy_and_a_first_read_its_fresh_characters() -> None:
    body = SimpleNamespace(title="A", body="the body", content_hash="h1", created_at=datetime(2026, 1, 1, tzinfo=UTC))
    box, files = toolbox(EMPTY, Owners(body))
    first, inclusions = await box.execute(ToolCall("read_publication", {"id": "pub_a", "version": 2}))
    read = first.value_as(SourceRead)
    ref = Ref(kind="publication", id="pub_a", version=2)
    assert (read.ref, read.chars, read.fresh_chars) == (ref, len(files.texts[read.path]), len(files.texts[read.path]))
    assert first.data == {"path": read.path, "chars": read.chars, "ref": ref.model_dump(), "fresh_chars": read.chars}
    assert [i.ref for i in inclusions] == [ref]
    again, _ = await box.execute(ToolCall("read_publication", {"id": "pub_a", "version": 2}))
    assert again.value_as(SourceRead).fresh_chars is None and "fresh_chars" not in again.data


async def test_a_read_refused_answers_why_with_the_fields_it_set() -> None:
    box, _ = toolbox(EMPTY, Owners())
    result, _ = await box.execute(ToolCall("read_publication", {"id": "pub_x", "version": 1}))
    read = result.value_as(SourceRead)
    assert not result.ok and read.reason == "not_found"
    assert result.data == {"path": read.path, "reason": "not_found"}
