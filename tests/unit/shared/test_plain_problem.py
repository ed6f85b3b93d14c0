"""A refused field in words a person reads: the limit it broke and the size it had (shared/errors.py)."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.errors import plain_problem


class Form(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=5)
    code: str = Field(default="a", min_length=3, pattern="^[a-z]+$")
    count: int = Field(default=1, ge=1, le=9)
    tags: list[str] = Field(default_factory=list, max_length=2)
    kind: Literal["note", "draft"] = "note"
    ratio: float = Field(default=1.0, gt=0)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"title": ""}, "must not be empty"),
        ({"title": "abcdefgh"}, "too long: 8 characters, the limit is 5"),
        ({"title": "a", "code": "ab"}, "must be at least 3 characters"),
        ({"title": "a", "code": "ABC"}, "is not in the expected form (the pattern ^[a-z]+$)"),
        ({"title": "a", "count": 0}, "must be at least 1"),
        ({"title": "a", "count": 10}, "must be at most 9"),
        ({"title": "a", "count": "x"}, "must be a whole number"),
        ({"title": "a", "tags": ["a", "b", "c"]}, "too long: 3 items, the limit is 2"),
        ({"title": "a", "kind": "memo"}, "must be one of 'note' or 'draft'"),
        ({"title": "a", "ratio": 0}, "must be more than 0.0"),
        ({"title": "a", "other": 1}, "is not a field this request takes"),
        ({}, "is required"),
    ],
)
def test_each_refusal_names_what_is_wrong(data: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Form.model_validate(data)
    assert plain_problem(caught.value.errors()[0]) == problem
