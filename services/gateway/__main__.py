from __future__ import annotations

from typing import TYPE_CHECKING

from shared.gcfreeze import collector_paused, freeze_startup_objects

if TYPE_CHECKING:
    from shared.settings import GatewaySettings


def serve(settings: GatewaySettings) -> None:
    """One gateway process on the HTTP port: alone, or one of the workers sharing it."""
    # Imported and built without the cyclic collector (shared/gcfreeze.py); it runs again before the start waits.
    with collector_paused():
        import uvicorn

        from services.gateway.app import create_app
        from services.gateway.transport.connections import Connections, fit_descriptors
        from services.gateway.transport.protocol import guarded
        from services.gateway.transport.workers import listen_socket
        from shared import tracing
        from shared.children import wait_for_file
        from shared.metrics import GATEWAY_WORKERS
        from shared.observe import configure_logging

        configure_logging(
            "gateway",
            settings.log_level,
            worker=settings.gateway_worker or None,
            process=settings.process,
            log_file=settings.log_file,
        )
        tracing.setup_tracing("gateway", sql=settings.trace_sql)
        connections = Connections(
            max_total=fit_descriptors(settings.max_connections),
            max_per_peer=settings.max_connections_per_peer,
            header_timeout=settings.header_timeout_seconds,
            body_timeout=settings.body_timeout_seconds,
            drain_timeout=settings.drain_timeout_seconds,
            preauth_body_timeout=settings.preauth_body_timeout_seconds,
            min_body_rate=settings.body_min_bytes_per_second,
        )
        GATEWAY_WORKERS.set(1)
        config = uvicorn.Config(
            create_app(settings, on_started=freeze_startup_objects),
            log_level="warning",
            # uvicorn's own lines go through the JSON logging configured above, not a text format of its own.
            log_config=None,
            access_log=False,
            # Nothing reads the client's address; X-Forwarded-For rewriting was a layer on every request.
            proxy_headers=False,
            loop="uvloop",
            # httptools, with each loop turn's writes sent together (transport/writes.py), held to the
            # connection caps and read deadlines (transport/connections.py, transport/protocol.py).
            http=guarded(connections),
        )
    wait_for_file(settings.infra_ready_file)
    sock = listen_socket(settings.http_host, settings.http_port, shared=settings.gateway_worker > 0)
    # uvicorn handles SIGTERM: it stops accepting, finishes in-flight requests, then runs the lifespan exit.
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    with collector_paused():
        from shared.settings import GatewaySettings

        settings = GatewaySettings()
    if settings.gateway_workers > 1 and settings.gateway_worker == 0:
        # Started on its own (a container): become the parent of the workers (services/gateway/transport/workers.py).
        from services.gateway.transport.workers import run_workers

        raise SystemExit(run_workers(settings.gateway_workers, settings.http_host, settings.http_port))
    serve(settings)
