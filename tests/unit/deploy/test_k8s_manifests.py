"""deploy/k8s: every manifest valid against Kubernetes' own schemas (offline, strict), and the shape the
design asks for: a probed, resourced Deployment per process, a 3-node NATS StatefulSet with the same users
as the code, secrets per process, and only the gateway open to the outside."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from shared.contracts.common import ALL_PROCESSES
from shared.natsauth import deployment_authorization

K8S = Path(__file__).resolve().parents[3] / "deploy" / "k8s"
KUBERNETES_VERSION = "1.31.0"


def kustomization() -> dict[str, Any]:
    return dict(yaml.safe_load((K8S / "kustomization.yaml").read_text()))


def manifests() -> list[dict[str, Any]]:
    docs = []
    for name in kustomization()["resources"]:
        docs += [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]
    return docs


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in manifests() if d["kind"] == kind}


@pytest.mark.parametrize("doc", manifests(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_manifest_is_valid(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_a_probed_and_resourced_deployment_per_process_with_its_own_secret_only() -> None:
    deployments = of_kind("Deployment")
    # Beside the services, the outside subscribers' consumer guard (shared.consumerguard).
    assert set(deployments) == {*ALL_PROCESSES, "outside"}
    generated = {g["name"] for g in kustomization()["secretGenerator"]}
    guard = deployments.pop("outside")["spec"]["template"]["spec"]["containers"][0]
    assert guard["command"] == ["python", "-m", "shared.consumerguard"]
    assert [e["secretRef"]["name"] for e in guard["envFrom"]] == ["dossier-outside"]
    for name, deployment in deployments.items():
        assert deployment["spec"]["replicas"] >= 2
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert container["command"] == ["python", "-m", f"services.{name}"]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert probe in container, (name, probe)
        assert {"cpu", "memory"} <= set(container["resources"]["requests"])
        secrets = [e["secretRef"]["name"] for e in container["envFrom"]]
        assert secrets == [f"dossier-{name}"] and secrets[0] in generated
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["DOSSIER_NATS_USER"] == name and env["DOSSIER_STREAM_REPLICAS"] == "3"
        assert len(env["DOSSIER_NATS_URL"].split(",")) == 3, "every node in the server list"


def test_nats_is_a_three_node_cluster_with_the_users_of_the_code() -> None:
    [nats] = of_kind("StatefulSet").values()
    assert nats["spec"]["replicas"] == 3
    config = of_kind("ConfigMap")["nats-config"]["data"]
    assert config["auth.conf"] == deployment_authorization()
    assert "sync_interval: always" in config["nats.conf"] and "verify: true" in config["nats.conf"]
    assert {g["name"] for g in kustomization()["secretGenerator"]} >= {"nats-users", "nats-route-tls"}


def test_only_the_gateway_is_reachable_from_outside() -> None:
    policies = of_kind("NetworkPolicy")
    deny = policies["default-deny-ingress"]["spec"]
    assert deny["podSelector"] == {} and deny["policyTypes"] == ["Ingress"] and "ingress" not in deny
    open_to_all = [
        p["spec"]["podSelector"]
        for p in policies.values()
        if any("from" not in rule for rule in p["spec"].get("ingress", []))
    ]
    assert open_to_all == [{"matchLabels": {"app.kubernetes.io/name": "gateway"}}]
    assert {s["metadata"]["name"] for s in of_kind("Service").values() if s["spec"].get("type") == "LoadBalancer"} <= {
        "gateway"
    }
