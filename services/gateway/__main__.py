import uvicorn

from services.gateway.app import create_app
from services.gateway.connections import Connections, fit_descriptors, guarded
from shared import tracing
from shared.gcfreeze import freeze_startup_objects
from shared.observe import configure_logging
from shared.settings import GatewaySettings

if __name__ == "__main__":
    settings = GatewaySettings()
    configure_logging("gateway", settings.log_level)
    tracing.setup_tracing("gateway")
    connections = Connections(
        max_total=fit_descriptors(settings.max_connections),
        max_per_peer=settings.max_connections_per_peer,
        header_timeout=settings.header_timeout_seconds,
        body_timeout=settings.body_timeout_seconds,
    )
    # uvicorn handles SIGTERM: it stops accepting, finishes in-flight requests, then runs the lifespan exit.
    uvicorn.run(
        create_app(settings, on_started=freeze_startup_objects),
        host=settings.http_host,
        port=settings.http_port,
        log_level="warning",
        # uvicorn's own lines go through the JSON logging configured above, not a text format of its own.
        log_config=None,
        access_log=False,
        # Nothing reads the client's address; X-Forwarded-For rewriting was a layer on every request.
        proxy_headers=False,
        loop="uvloop",
        # httptools, with each loop turn's writes sent together (writes.py), held to the connection caps
        # and read deadlines (connections.py).
        http=guarded(connections),
    )
