"""Run in a fresh environment holding only dossier-client (tests/e2e/test_client_install.py): two
sessions, one blocking and one async, each outlive their first lease while the client renews it in the
background, then read and finish. Prints what the test checks, as JSON."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import UTC, datetime, timedelta

from dossier_client import AsyncDossier, Dossier, Lease, Passage, RunSession

SHORTEST_LEASE = 30  # seconds, the least the API gives
QUERY = "redemption gates"


def until_past(*leases: Lease) -> float:
    """Seconds until every lease's first expiry has passed (a little after, so the server's clock has too):
    what the sessions must outlive. The time itself is the outcome waited for."""
    last = max(lease.expires_at for lease in leases) + timedelta(seconds=2)
    return max((last - datetime.now(UTC)).total_seconds(), 0.0)


def answer(passage: Passage) -> str:
    sentence = passage.text.split("\n\n", 1)[-1].strip().split(". ")[0].rstrip(".")
    return f"- {sentence} ({passage.cite()})."


def outcome(first: Lease, session_lease: Lease, run: object) -> dict[str, object]:
    return {"first": first.model_dump(mode="json"), "last": session_lease.model_dump(mode="json"), "run": run}


async def async_session(workspace_id: str, question: str, sync_first: Lease) -> dict[str, object]:
    async with AsyncDossier() as dossier:
        async with dossier.external_run(workspace_id, question, lease_seconds=SHORTEST_LEASE) as run:
            first = run.lease
            hit = (await run.search(QUERY))[0]
            await asyncio.sleep(until_past(first, sync_first))
            passage = await run.read(hit)
            done = await run.finish(answer(passage))
            return outcome(first, run.lease, done.model_dump(mode="json"))


def main(workspace_id: str, question: str) -> None:
    with Dossier() as dossier, dossier.external_run(workspace_id, question, lease_seconds=SHORTEST_LEASE) as run:
        assert isinstance(run, RunSession)
        first = run.lease
        hit = run.search(QUERY)[0]
        # Meanwhile, the async session waits past both first leases (the loop runs its renewer task).
        other = asyncio.run(async_session(workspace_id, question, first))
        time.sleep(until_past(first))
        passage = run.read(hit)
        done = run.finish(answer(passage))
        mine = outcome(first, run.lease, done.model_dump(mode="json"))
    print(json.dumps({"sync": mine, "async": other}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
