"""Where the parser cannot be confined, the assets service parses nothing, and says why in its health.

The kernel is made to refuse one step of the confinement: the plan names a runtime folder that does
not exist, so the parser process stops before it is confined, exactly as it stops where mount or user
namespaces are not allowed. Nothing else about the service changes.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from services.assets.app import create_app
from services.assets.confinement import Plan, runtime_paths
from services.gateway.routes.health import health
from shared.bus import BusClient
from shared.restarts import read_restarts
from shared.settings import AssetsSettings
from tests.service.assets.conftest import AssetsUnderTest, actor
from tests.support.probe import probe_until
from tests.support.service import running


async def test_versions_fail_saying_why_and_health_says_so(
    make_settings: Callable[..., AssetsSettings], bus: BusClient
) -> None:
    settings = make_settings()
    runtime = create_app(settings)
    assert runtime.health_problem() is None
    runtime.sandbox._plan = Plan(userns=True, uid=1000, gid=1000, binds=(*runtime_paths(), "/no-such-runtime"))
    async with running(runtime):
        assets = AssetsUnderTest(settings, runtime.blobs, bus)

        async def degraded() -> bool:
            reply = await bus.health("assets")
            return reply is not None and reply.status == "degraded"

        await probe_until(degraded, timeout=60)
        reply = await bus.health("assets")
        assert reply is not None and reply.reason is not None
        assert reply.reason.startswith("parsing is refused: the parser cannot be confined here")
        # Said without the host's paths: the health route answers anyone.
        assert reply.reason.endswith("No such file or directory") and "/no-such-runtime" not in reply.reason

        version = await assets.upload(actor(), "refused", b"plain words\n", filename="a.txt")
        assert version["status"] == "failed"
        assert version["extraction"]["notes"][0].startswith("parsing is refused: the parser cannot be confined here")
        # Still answering: the service is up, only parsing is refused.
        assert await bus.ping("assets")

        # The gateway's /v1/health (its route over this bus; the other services are not running here).
        response = await health(bus, read_restarts(None))
        body = json.loads(response.body)
        assert response.status_code == 503 and body["status"] == "degraded"
        assert body["services"]["assets"] == "degraded"
        assert body["reasons"]["assets"] == reply.reason
