"""The events the run host emits: one `run.*` event per change of a run's status, recorded in the
transaction that makes the change (shared/outbox.py), its payload the contract's `RunEvent`."""

from __future__ import annotations

import asyncpg

from services.runhost.admitted import AdmittedRun
from shared.contracts import runhost as c
from shared.contracts.common import EventType, PublicationRef
from shared.outbox import enqueue

# The status each event announces.
STATUS: dict[EventType[c.RunEvent], c.RunStatus] = {
    c.EVT_ADMITTED: "admitted",
    c.EVT_STARTED: "running",
    c.EVT_COMPLETED: "completed",
    c.EVT_FAILED: "failed",
    c.EVT_CANCELLED: "cancelled",
}


def run_event(
    run: AdmittedRun,
    type: EventType[c.RunEvent],
    *,
    publication: PublicationRef | None = None,
    error: str | None = None,
) -> c.RunEvent:
    return c.RunEvent(
        run_id=run.id,
        workspace_id=run.workspace_id,
        conversation_id=run.conversation_id,
        status=STATUS[type],
        publication=publication,
        error=error,
    )


async def emit(
    conn: asyncpg.Connection,
    type: EventType[c.RunEvent],
    run: AdmittedRun,
    *,
    publication: PublicationRef | None = None,
    error: str | None = None,
) -> None:
    """Record the event inside the caller's transaction; it is published once that commits."""
    event = run_event(run, type, publication=publication, error=error)
    await enqueue(conn, type, event, scope=run.scope)
