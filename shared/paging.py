"""Keyset paging (docs/api.md): an opaque cursor holds the sort key of the last item of a page.

A cursor is base64url JSON of that key. It grants nothing (every query still filters by scope), so it is
not signed; it is only checked to have the shape its list expects, so a forged one answers `invalid`
naming `cursor` instead of reaching SQL. A list's `Keyset` holds both sides of it: the cursor and the SQL.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar

import asyncpg
from pydantic import Field, TypeAdapter, ValidationError

from shared.contracts.common import PageRequest
from shared.errors import Invalid
from shared.storable import unstorable_field

T = TypeVar("T")

# Key types of a cursor, bounded like the columns they are compared with: a number no column can hold would
# otherwise fail in the driver as a fault instead of answering `invalid`.
Int32 = Annotated[int, Field(ge=0, le=2**31 - 1)]
Int64 = Annotated[int, Field(ge=0, le=2**63 - 1)]


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def encode_cursor(key: Sequence[Any]) -> str:
    raw = json.dumps([_plain(v) for v in key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@functools.cache
def _adapter(types: tuple[Any, ...]) -> TypeAdapter[Any]:
    """The validator of a key of `types`, built once for them (about 0.2 ms each time otherwise)."""
    return TypeAdapter(tuple[types])  # type: ignore[valid-type]


def decode_cursor(cursor: str, *types: Any) -> tuple[Any, ...]:
    """The key a cursor holds, typed as `types`; anything else is `invalid` naming `cursor`."""
    adapter = _adapter(types)
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = adapter.validate_python(json.loads(raw))
    except (binascii.Error, ValueError, ValidationError) as exc:
        raise Invalid("the cursor is not one this list gave out", {"field": "cursor"}) from exc
    if unstorable_field(key) is not None or any(isinstance(v, datetime) and v.tzinfo is None for v in key):
        raise Invalid("the cursor is not one this list gave out", {"field": "cursor"})
    return tuple(key)


def cut_page(rows: Sequence[T], limit: int, key: Callable[[T], Sequence[Any]]) -> tuple[list[T], str | None]:
    """Rows were fetched with `LIMIT limit + 1`: the extra row only says that another page exists."""
    page = list(rows[:limit])
    if len(rows) <= limit or not page:
        return page, None
    return page, encode_cursor(key(page[-1]))


@dataclass(frozen=True)
class Keyset:
    """How one list pages: the columns of its sort key as its query names them (`w.created_at`; a row holds
    it as `created_at`), the type of each in a cursor (as `decode_cursor` takes them), and the direction."""

    columns: tuple[str, ...]
    types: tuple[Any, ...]
    descending: bool = False

    def after(self, cursor: str | None) -> tuple[Any, ...] | None:
        """The key a page starts after; None for the first page."""
        return decode_cursor(cursor, *self.types) if cursor else None

    async def fetch(
        self, conn: asyncpg.Connection, query: str, *args: Any, after: Sequence[Any] | None, limit: int
    ) -> list[asyncpg.Record]:
        """At most `limit` rows of `query` that follow `after`, in key order. `query` is a SELECT that ends
        with its WHERE conditions and numbers its parameters ($1, $2, …) for `args`."""
        keys = ", ".join(self.columns)
        direction = " DESC" if self.descending else ""
        params = list(args)
        if after is not None:
            marks = ", ".join(f"${len(params) + i}" for i in range(1, len(after) + 1))
            query += f" AND ({keys}) {'<' if self.descending else '>'} ({marks})"
            params.extend(after)
        order = ", ".join(column + direction for column in self.columns)
        rows: list[asyncpg.Record] = await conn.fetch(
            f"{query} ORDER BY {order} LIMIT ${len(params) + 1}", *params, limit
        )
        return rows

    async def page(
        self, conn: asyncpg.Connection, query: str, *args: Any, of: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        """The page `of` asks for (`limit` rows after its `cursor`) and the cursor of the next one (None on the
        last page): one row more than the page is fetched, to know whether another page exists."""
        rows = await self.fetch(conn, query, *args, after=self.after(of.cursor), limit=of.limit + 1)
        return self.cut(rows, of.limit)

    def cut(self, rows: Sequence[T], limit: int) -> tuple[list[T], str | None]:
        """`cut_page` for rows fetched with `LIMIT limit + 1`: the cursor holds the last row's key. A row is a
        record (or a mapping), or a model made from one (its fields named as the columns)."""
        names = [column.rpartition(".")[2] for column in self.columns]
        return cut_page(rows, limit, lambda row: [_field(row, name) for name in names])


def _field(row: Any, name: str) -> Any:
    return row[name] if isinstance(row, asyncpg.Record | Mapping) else getattr(row, name)
