"""The object keys' rules as written for MinIO match the code, and the S3 server reads them as meant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devstack.objectstore import Key, Refused, required
from shared.objectkeys import OBJECT_RULES, minio_policy

ROOT = Path(__file__).resolve().parents[3]


def test_the_minio_policies_are_the_generated_ones() -> None:
    for process in OBJECT_RULES:
        written = json.loads((ROOT / "deploy" / "minio" / "policies" / f"{process}.json").read_text())
        assert written == minio_policy(process), process


def test_no_policy_lets_a_key_list_the_bucket() -> None:
    for process in OBJECT_RULES:
        actions = {a for statement in minio_policy(process)["Statement"] for a in statement["Action"]}
        assert not any("List" in a and a != "s3:ListMultipartUploadParts" for a in actions), process


def test_a_copy_needs_its_source_read_and_a_listing_needs_list() -> None:
    copy = required("PUT", "/b/runs/x", {"X-Amz-Copy-Source": "/b/sha256%2Fab%2Fdoc?versionId=1"})
    assert copy == [("write", "b", "runs/x"), ("read", "b", "sha256/ab/doc")]
    assert required("GET", "/b?list-type=2&prefix=runs/", {}) == [("list", "b", "")]
    assert required("GET", "/b?location", {}) == []
    assert required("DELETE", "/b/uploads/u?uploadId=1", {}) == [("write", "b", "uploads/u")]


def test_the_rules_read_a_request_as_localbucket_does() -> None:
    # localbucket decodes query names: this is an abort (write), not a delete.
    assert required("DELETE", "/b/uploads/u?upload%49d=1", {}) == [("write", "b", "uploads/u")]
    # Not a key under runs/: localbucket would not take it, so the rules do not judge it as one.
    for source in ("/b/runs/../sha256/ab/doc", "/b/runs//x", "b/runs%2F.%2Fx"):
        with pytest.raises(Refused):
            required("PUT", "/b/runs/x", {"x-amz-copy-source": source})
    with pytest.raises(Refused):
        required("PUT", "/b/runs/../sha256/ab/doc", {})


def test_stat_is_part_of_read_but_not_the_reverse() -> None:
    reader = Key("s", ("b",), {"sha256/": frozenset({"read"})})
    asker = Key("s", ("b",), {"sha256/": frozenset({"stat"})})
    assert reader.may("stat", "sha256/x") and asker.may("stat", "sha256/x")
    assert not asker.may("read", "sha256/x") and not reader.may("read", "runs/x")
