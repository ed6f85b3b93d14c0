"""An event carries exactly the payload model its type declares: anything else is refused before it is recorded."""

from __future__ import annotations

import pytest

from shared.contracts import publication, workspace
from shared.outbox import enqueue


async def test_an_event_with_another_types_payload_is_refused_before_the_database_sees_it() -> None:
    with pytest.raises(TypeError, match=r"publication\.committed event carries a VersionEvent, not a WorkspaceChanged"):
        await enqueue(None, publication.EVT_COMMITTED, workspace.WorkspaceChanged(workspace_id="w"), scope="s")  # type: ignore[arg-type]
