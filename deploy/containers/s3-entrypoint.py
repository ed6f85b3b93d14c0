"""The local S3 image's entry point: Dossier's signed S3 server (devstack/objectstore.py on localbucket),
started the way docker-compose.yml and tests/support/infra.py start MinIO, so either image fits.

- `server DATA` serves DATA on 0.0.0.0:9000. The root key is MINIO_ROOT_USER / MINIO_ROOT_PASSWORD
  (every bucket). This server has no admin API, so the users MinIO gets from deploy/minio/init-users.sh
  come from the environment instead: each S3_<SERVICE>_SECRET is the key `dossier-<service>`, limited
  to the bucket S3_BUCKET (default `dossier`), which is created when missing, and there to the
  service's own prefixes (shared/objectkeys.py, copied beside this file).
- `health` exits 0 once the server answers HTTP on port 9000 (any answer: unsigned requests get 403).
"""

import http.client
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from shared.objectkeys import key_entry

PORT = 9000


def keys_from_env(env: dict[str, str], bucket: str) -> dict[str, dict[str, object]]:
    keys: dict[str, dict[str, object]] = {
        env["MINIO_ROOT_USER"]: {"secret": env["MINIO_ROOT_PASSWORD"], "buckets": ["*"]}
    }
    for name, value in env.items():
        match = re.fullmatch(r"S3_([A-Z]+)_SECRET", name)
        if match and value:
            service = match.group(1).lower()
            keys[f"dossier-{service}"] = key_entry(service, value, [bucket])
    return keys


def serve(data: Path) -> None:
    bucket = os.environ.get("S3_BUCKET", "dossier")
    for required in ("MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"):
        if not os.environ.get(required):
            sys.exit(f"{required} must be set")
    os.umask(0o077)
    if bucket != "*":  # "*": every key may make buckets of its own (the test fixtures' per-test buckets)
        (data / bucket).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="s3-keys-"))
    credentials = folder / "keys.json"
    credentials.write_text(json.dumps(keys_from_env(dict(os.environ), bucket)))
    argv = [sys.executable, "/opt/s3/objectstore.py", "--host", "0.0.0.0", "--port", str(PORT)]
    os.execv(sys.executable, [*argv, "--credentials", str(credentials), str(data)])


def health() -> None:
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=3)
    try:
        conn.request("GET", "/")
        conn.getresponse().read()
    except OSError as exc:
        sys.exit(f"not answering: {exc}")


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["server"] and len(args) == 2:
        serve(Path(args[1]))
    elif args == ["health"]:
        health()
    else:
        sys.exit("usage: dossier-s3 server DATA | dossier-s3 health")


if __name__ == "__main__":
    main()
