"""What each process's object-store key may do, by key prefix: its own objects and nothing else.

The object layout (shared.blobs): `uploads/<id>` the gateway's staging of a streamed upload;
`sha256/ab/<hash>` content-addressed bytes (source documents and retained HTML); `runs/sha256/ab/<hash>`
runs' working files, stored once per content (`runs/<run>/...`: those stored before, one copy per run). The
local S3 server (devstack.objectstore) checks these rules on every request, the source of a copy included;
deploy/minio holds them as MinIO policies.

- gateway: stages uploads (read, write, delete its own staging) and moves them to their content key;
  writes retained HTML and reads it back for a download.
- assets: reads the content-addressed bytes it parses, writes the files it imports.
- runhost: reads and writes its runs' working files, and deletes those no run needs any more (a content no
  run's file names; a run's own files past retention); writes a run's HTML report.
- artifact: may only ask whether bytes are there (HEAD), never read them.
No process may list a bucket: every key is known from a database row or a message.
"""

from __future__ import annotations

from typing import Any

READ = "read"
STAT = "stat"
WRITE = "write"
DELETE = "delete"
ACTIONS = (READ, STAT, WRITE, DELETE)

UPLOADS = "uploads/"
CONTENT = "sha256/"
RUNS = "runs/"

OBJECT_RULES: dict[str, dict[str, tuple[str, ...]]] = {
    "gateway": {UPLOADS: (READ, WRITE, DELETE), CONTENT: (READ, WRITE)},
    "assets": {CONTENT: (READ, WRITE)},
    "runhost": {RUNS: (READ, WRITE, DELETE), CONTENT: (WRITE,)},
    "artifact": {CONTENT: (STAT,)},
}


def key_entry(process: str, secret: str, buckets: list[str]) -> dict[str, Any]:
    """One key of the S3 server's credentials file (devstack.objectstore.load_keys)."""
    rules = OBJECT_RULES.get(process, {})
    return {"secret": secret, "buckets": buckets, "prefixes": {p: list(a) for p, a in rules.items()}}


# MinIO authorizes HEAD as s3:GetObject: there, `stat` cannot be told from `read`.
_S3_ACTIONS = {
    READ: ("s3:GetObject",),
    STAT: ("s3:GetObject",),
    WRITE: ("s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"),
    DELETE: ("s3:DeleteObject",),
}


def minio_policy(process: str, bucket: str = "dossier") -> dict[str, Any]:
    """The same rules as a MinIO policy (deploy/minio/policies/<process>.json): no bucket listing at all."""
    statements = []
    for prefix, actions in OBJECT_RULES[process].items():
        granted = sorted({s3 for action in actions for s3 in _S3_ACTIONS[action]})
        statements.append({"Effect": "Allow", "Action": granted, "Resource": [f"arn:aws:s3:::{bucket}/{prefix}*"]})
    return {"Version": "2012-10-17", "Statement": statements}


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(minio_policy(sys.argv[1]), indent=2))
