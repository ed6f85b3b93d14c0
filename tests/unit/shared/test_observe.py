"""shared.observe: the JSON log line, and its timestamp built once a second."""

from __future__ import annotations

import json
import logging
import random
from datetime import UTC, datetime

from shared.observe import JsonFormatter, bound


def iso(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")


def test_the_timestamp_is_exactly_what_datetime_writes() -> None:
    formatter = JsonFormatter("test")
    rnd = random.Random(14)
    base = 1_796_059_182
    edges = [base + 0.0, base + 0.0005, base + 0.9994999, base + 0.9995, base + 0.9999995, base + 0.9999996]
    moments = sorted(edges + [base + rnd.random() * 5 for _ in range(20_000)])
    for created in moments:
        assert formatter.timestamp(created) == iso(created), created
    # Out of order too: the cached second is replaced, never reused for another second.
    for created in rnd.sample(moments, 2_000):
        assert formatter.timestamp(created) == iso(created), created


def test_a_line_carries_its_fields_and_the_bound_ids() -> None:
    formatter = JsonFormatter("gateway")
    record = logging.LogRecord("dossier.x", logging.INFO, __file__, 1, "read %s", ("pub_1",), None)
    with bound(request_id="req_1", scope="acme"):
        line = json.loads(formatter.format(record))
    assert line == {
        "ts": iso(record.created),
        "service": "gateway",
        "level": "info",
        "msg": "read pub_1",
        "logger": "dossier.x",
        "request_id": "req_1",
        "scope": "acme",
    }


def test_a_lone_surrogate_is_escaped_not_lost() -> None:
    record = logging.LogRecord("dossier.x", logging.INFO, __file__, 1, "bad \udc80 text", (), None)
    assert json.loads(JsonFormatter("gateway").format(record))["msg"] == "bad \udc80 text"
