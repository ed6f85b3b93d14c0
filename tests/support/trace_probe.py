"""A process that runs the gateway and the publication service with an in-memory span exporter.

The tracing test runs it as a subprocess (a tracer provider is process-global), makes one request through
the gateway, and prints the finished spans as JSON lines.
"""

from __future__ import annotations

import asyncio
import json
import sys

import httpx
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.gateway.app import create_app as create_gateway
from services.publication.app import create_app as create_publication
from shared import tracing
from shared.settings import GatewaySettings, PublicationSettings
from tests.support.service import running, settings_from


async def main(publication_env: dict[str, str], gateway_env: dict[str, str]) -> None:
    exporter = InMemorySpanExporter()
    tracing.setup_tracing("probe", exporter)
    publication = create_publication(settings_from(publication_env, PublicationSettings))
    gateway = create_gateway(settings_from(gateway_env, GatewaySettings))
    async with running(publication), gateway.router.lifespan_context(gateway):
        transport = httpx.ASGITransport(app=gateway)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
            admin = {"Authorization": f"Bearer {gateway_env['DOSSIER_ADMIN_TOKEN']}"}
            issued = await http.post("/v1/admin/tokens", json={"scope": "tracing", "principal": "p"}, headers=admin)
            token = issued.json()["token"]
            exporter.clear()
            r = await http.post(
                "/v1/publications", json={"title": "T", "body": "B"}, headers={"Authorization": f"Bearer {token}"}
            )
            assert r.status_code == 201, r.text
    for span in exporter.get_finished_spans():
        parent = span.parent.span_id if span.parent else None
        print(
            json.dumps(
                {
                    "name": span.name,
                    "kind": span.kind.name,
                    "trace_id": f"{span.context.trace_id:032x}",
                    "span_id": span.context.span_id,
                    "parent_id": parent,
                    "attributes": {k: str(v) for k, v in (span.attributes or {}).items()},
                }
            )
        )


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1]), json.loads(sys.argv[2])))
