"""Write every file made from the contracts: `python -m devstack.generated` (or `make generated`).

- docs/asyncapi.json, the bus's AsyncAPI document (devstack/asyncapi.py);
- deploy/nats/auth.conf, the NATS accounts and each process's permissions (shared/natsauth.py);
- the same text in the `nats-config` ConfigMap of deploy/k8s/nats.yaml.

Unit tests compare each file with what the code makes now, so a contract changed without this fails them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from devstack import asyncapi
from shared.natsauth import deployment_authorization

ROOT = Path(__file__).resolve().parents[1]
AUTH_CONF = ROOT / "deploy" / "nats" / "auth.conf"
K8S_NATS = ROOT / "deploy" / "k8s" / "nats.yaml"
SEPARATOR = "\n---\n"


def k8s_nats(text: str, authorization: str) -> str:
    """The manifest with the ConfigMap's `auth.conf` replaced; its leading comments and the other documents
    stay as they are."""
    first, rest = text.split(SEPARATOR, 1)
    lines = first.splitlines()
    comments = [line for line in lines if line.startswith("#")]
    config = yaml.safe_load("\n".join(line for line in lines if not line.startswith("#")))
    config["data"]["auth.conf"] = authorization
    body = yaml.safe_dump(config, sort_keys=False, width=120)
    return "\n".join([*comments, body.rstrip("\n")]) + SEPARATOR + rest


def main() -> int:
    authorization = deployment_authorization()
    writes = {
        asyncapi.DOCUMENT: asyncapi.render(),
        AUTH_CONF: authorization,
        K8S_NATS: k8s_nats(K8S_NATS.read_text(), authorization),
    }
    for path, text in writes.items():
        changed = not path.exists() or path.read_text() != text
        if changed:
            path.write_text(text)
        print(f"{'wrote' if changed else 'kept '} {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
