"""A service that promises to leave no session state on its database connections (`ServiceRuntime(...,
session_state=False)`, shared/db.py) skips the reset query when a connection goes back to its pool. Nothing it
runs, nor the shared code under it, may then take a session-level advisory lock, LISTEN (but a listener it
takes off before the connection goes back), or SET outside a transaction: the next borrower of the connection
would inherit it. A check of the source text: it knows the forms this code base writes them in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PROMISE = re.compile(r"ServiceRuntime\([^)]*session_state=False")
SESSION_STATE = {
    "a session advisory lock": re.compile(r"pg_(try_)?advisory_lock(_shared)?\("),
    "LISTEN": re.compile(r"""["']\s*LISTEN\s"""),
    "SET for the session": re.compile(r"""(execute\(\s*f?["']|;)\s*SET\s+(?!LOCAL\b)"""),
    "set_config for the session": re.compile(r"set_config\([^)]*,\s*false\s*\)", re.I),
}
PROMISED = sorted(p.parent.name for p in (ROOT / "services").glob("*/app.py") if PROMISE.search(p.read_text()))


def offences(text: str) -> list[str]:
    found = [what for what, pattern in SESSION_STATE.items() if pattern.search(text)]
    # A listener is session state too, unless it is taken off (UNLISTEN) before its connection goes back.
    if text.count("add_listener(") > text.count("remove_listener("):
        found.append("a listener never removed")
    return found


def test_the_check_finds_each_kind_of_session_state_and_not_a_transactions_own() -> None:
    assert offences("SELECT pg_advisory_lock($1)") == ["a session advisory lock"]
    assert offences('await conn.execute("LISTEN wake")') == ["LISTEN"]
    assert offences("await conn.add_listener(CHANNEL, on_hold)") == ["a listener never removed"]
    assert offences("await c.add_listener(CHANNEL, f)\nawait c.remove_listener(CHANNEL, f)") == []
    assert offences('await conn.execute("SET statement_timeout = 0")') == ["SET for the session"]
    assert offences('await conn.execute("SET LOCAL a = 1; SET b = 2")') == ["SET for the session"]
    assert offences("SELECT set_config('x.y', 'on', false)") == ["set_config for the session"]
    harmless = (
        'await conn.execute("SELECT pg_advisory_xact_lock($1); SET LOCAL random_page_cost = 1.1")\n'
        "UPDATE runs SET status = 'x' ON CONFLICT (id) DO UPDATE\n"
        '"   SET size = EXCLUDED.size"\n'
        "SELECT set_config('x.y', 'on', true)"
    )
    assert offences(harmless) == []


def test_the_services_that_skip_the_reset_are_found() -> None:
    assert {"publication", "runhost"} <= set(PROMISED)


@pytest.mark.parametrize("service", PROMISED)
def test_a_service_that_skips_the_reset_leaves_no_session_state(service: str) -> None:
    files = [*(ROOT / "services" / service).rglob("*.py"), *(ROOT / "services" / service).rglob("*.sql")]
    files += [p for p in (ROOT / "shared").rglob("*.py")]
    found = {str(p.relative_to(ROOT)): what for p in files if (what := offences(p.read_text()))}
    assert found == {}
