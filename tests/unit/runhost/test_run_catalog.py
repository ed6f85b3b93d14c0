"""A run's catalog as admitted: its first page from the run row, later pages as of the admission, and a
grant for a publication a later page holds."""

from __future__ import annotations

from typing import Any

import pytest

from services.runhost.admitted import AdmittedRun
from services.runhost.catalog import RunCatalog
from shared.contracts.common import Ref
from shared.contracts.workspace import Catalog
from shared.errors import Invalid
from tests.unit.runhost.test_admitted import stored_row


class Workspace:
    """The workspace's answers, as runhost's `Owners` gives them."""

    def __init__(self, held: set[str]):
        self.held = held
        self.asked: list[dict[str, Any]] = []

    async def fetch_admitted_catalog_page(self, actor: Any, **asked: Any) -> Catalog:
        self.asked.append(asked)
        return Catalog(items=[], complete=True, omitted=0)

    async def admitted_catalog_holds(self, actor: Any, *, workspace_id: str, as_of: int, ref: Ref) -> bool:
        self.asked.append({"as_of": as_of, "ref": ref.key()})
        return ref.id in self.held


def pages(held: set[str], **changes: Any) -> tuple[RunCatalog, Workspace]:
    workspace = Workspace(held)
    run = AdmittedRun.model_validate(stored_row(**changes))
    return RunCatalog(run, workspace, mint=lambda refs: "grant+" + ",".join(refs)), workspace  # type: ignore[arg-type]


async def test_the_first_page_is_the_admissions_and_later_pages_are_read_as_of_it() -> None:
    catalog, workspace = pages(set(), catalog_as_of=42)
    assert (await catalog.page(None)).items[0].id == "pub_1" and workspace.asked == []
    await catalog.page("next-page")
    assert workspace.asked == [{"workspace_id": "ws_1", "as_of": 42, "cursor": "next-page"}]
    earlier, _ = pages(set())
    with pytest.raises(Invalid):
        await earlier.page("next-page")


async def test_a_publication_a_later_page_holds_is_read_under_a_grant_that_names_it() -> None:
    catalog, workspace = pages({"pub_late"}, catalog_as_of=42)
    on_first_page = Ref(kind="publication", id="pub_1", version=3)
    assert await catalog.grant_for(on_first_page, "grant") == "grant" and workspace.asked == []
    late = Ref(kind="publication", id="pub_late", version=2)
    assert await catalog.grant_for(late, "grant") == "grant+publication:pub_late@2"
    # Not in the catalog as admitted: the run's own grant, which its owner refuses.
    assert await catalog.grant_for(Ref(kind="publication", id="pub_new", version=1), "grant") == "grant"
    earlier, workspace = pages({"pub_late"})
    assert await earlier.grant_for(late, "grant") == "grant" and workspace.asked == []
