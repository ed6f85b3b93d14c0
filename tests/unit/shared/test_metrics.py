"""Each process's /metrics carries the common dossier_* families and its own service's, not another's."""

from __future__ import annotations

from prometheus_client import generate_latest

from shared.contracts.common import ALL_PROCESSES
from shared.metrics import process_registry


def families(service: str) -> set[str]:
    text = generate_latest(process_registry(service)).decode()
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE dossier_")}


def test_a_service_family_appears_only_in_its_own_process() -> None:
    exported = {service: families(service) for service in ALL_PROCESSES}
    owners = {
        "dossier_runs": "runhost",
        "dossier_lease_takeovers_total": "runhost",
        "dossier_extraction_failures_total": "assets",
        "dossier_extraction_seconds": "assets",
        "dossier_coalesced_lookups": "publication",
        "dossier_http_requests_total": "gateway",
        "dossier_gateway_connections": "gateway",
        "dossier_gateway_workers": "gateway",
    }
    for family, owner in owners.items():
        assert {s for s, names in exported.items() if family in names} == {owner}, family


def test_the_bus_and_outbox_families_are_every_process() -> None:
    for service in ALL_PROCESSES:
        assert {"dossier_bus_calls_total", "dossier_outbox_lag_seconds", "dossier_dead_letters_total"} <= families(
            service
        ), service
