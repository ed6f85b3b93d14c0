"""A blank text is the same thing to the published schema, to Python and to pydantic's own patterns."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from shared.contracts.common import NOT_BLANK, Text

# Python's str.isspace() takes U+001C-U+001F for white space, ECMA-262's \s does not and takes U+FEFF.
BLANK = ["", " ", "\t\n", "\x1e", "\x1c\x1d\x1f", "\x85", "\u2028 ", "\u3000", "\ufeff"]
NOT_BLANK_TEXTS = ["a", " x ", "\x1ea", "é", "\u200b"]


class Query(BaseModel):
    q: str = Field(pattern=NOT_BLANK)


@pytest.mark.parametrize("text", BLANK)
def test_every_engine_refuses_a_blank_text(text: str) -> None:
    assert re.search(NOT_BLANK, text) is None
    with pytest.raises(ValidationError):
        TypeAdapter(Text).validate_python(text)
    with pytest.raises(ValidationError):
        Query(q=text)


@pytest.mark.parametrize("text", NOT_BLANK_TEXTS)
def test_every_engine_takes_a_text_with_a_visible_character(text: str) -> None:
    assert re.search(NOT_BLANK, text) is not None
    assert TypeAdapter(Text).validate_python(text) == text
    assert Query(q=text).q == text
    # What the services check (str.strip) agrees: nothing the schema takes is blank to them.
    assert text.strip()


def test_the_schema_states_the_same_pattern() -> None:
    assert TypeAdapter(Text).json_schema()["pattern"] == NOT_BLANK
