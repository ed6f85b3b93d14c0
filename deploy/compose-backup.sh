#!/bin/sh
# Backs a running compose deployment of Dossier up into one archive, at one point in time across its
# services (docs/operations.md, "Backup and restore"; compose-restore.sh puts it back):
#   sh deploy/compose-backup.sh [--env-file FILE] ARCHIVE
# from the folder of docker-compose.yml, with the project's own COMPOSE_PROJECT_NAME and COMPOSE_FILE if
# it has them; FILE is the deployment's .env (default ./.env).
#
# 1. Writes wait at every gateway process (`dossier admin writes hold`, run in the gateway's container)
#    while pg_basebackup, in the postgres container, copies the whole cluster (every service's database
#    at one instant) as one tar on stdout; then they go on.
# 2. The object bytes, copied after the databases by Dossier's image with the store's root key
#    (shared/objectcopy.py): every object a copied row names is there already.
# 3. The .env: every secret the data needs (the cluster's roles have its passwords).
# The archive (mode 0600) holds postgres.tar, objects/, env, manifest.json and SHA256SUMS (of all the
# others), which compose-restore.sh checks before it uses anything. Not in it: the NATS volume (the
# restore publishes again from the outboxes what no consumer had applied).
set -eu
PROG=compose-backup
. "$(dirname "$0")/compose-lib.sh"
read_arguments "$@"
[ -r "$ENV_FILE" ] || die "$ENV_FILE: no such file (the deployment's .env; --env-file FILE)" 2
[ -d "$(dirname "$ARCHIVE")" ] || die "$(dirname "$ARCHIVE"): no such folder" 2
[ ! -d "$ARCHIVE" ] || die "$ARCHIVE is a folder; name the archive to write" 2
for service in postgres gateway minio; do
  id=$(container "$service")
  [ -n "$id" ] && [ "$(docker inspect -f '{{.State.Running}}' "$id")" = true ] ||
    die "$service is not running: a backup copies a running deployment (docker compose up -d)" 2
done
load_env

umask 077
staging=$(mktemp -d "$(dirname "$ARCHIVE")/.dossier-backup.XXXXXX")
partial=$staging.tar.gz
held=0
# The engine's own exec on the containers compose made: quicker than compose's (v1 starts Python each time),
# and the hold lasts as long as the commands between its start and end.
gateway=$(container gateway)
postgres=$(container postgres)
gateway_cli() {
  docker exec "$gateway" dossier admin writes "$@" --url http://127.0.0.1:8080
}
finish() {
  status=$?
  # A backup that fails mid-way lets the writes go on now rather than when the hold runs out.
  [ "$held" = 0 ] || gateway_cli release || true
  rm -rf "$staging" "$partial"
  exit "$status"
}
trap finish EXIT
trap 'exit 130' INT TERM

milliseconds() { echo $(($(date +%s%N) / 1000000)); }
started=$(milliseconds)
gateway_cli hold --seconds 60
held=1
# The whole cluster at one instant; -X fetch: the WAL that makes it consistent, inside the same tar.
docker exec "$postgres" sh -c 'PGPASSWORD="$POSTGRES_PASSWORD" exec pg_basebackup -h 127.0.0.1 \
  -U "${POSTGRES_USER:-postgres}" -D - -F t -X fetch -c fast' >"$staging/postgres.tar"
gateway_cli release
held=0
held_ms=$(($(milliseconds) - started))
held_seconds=$((held_ms / 1000)).$(printf %03d $((held_ms % 1000)))

objectcopy "$staging" export /backup/objects
mkdir -p "$staging/objects"
cp "$ENV_FILE" "$staging/env"
major=$(tar -xOf "$staging/postgres.tar" PG_VERSION)
objects=$(find "$staging/objects" -type f | wc -l)
cat >"$staging/manifest.json" <<EOF
{"format": 1, "kind": "compose", "created_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "postgres_major": "$major", "objects": $objects, "writes_held_seconds": $held_seconds}
EOF
(cd "$staging" && find . -type f ! -path ./SHA256SUMS -print0 | sort -z | xargs -0 sha256sum >SHA256SUMS)
tar -czf "$partial" -C "$staging" .
mv "$partial" "$ARCHIVE"
echo "$PROG: $ARCHIVE: PostgreSQL $major cluster, $objects objects, $(wc -c <"$ARCHIVE") bytes; writes held ${held_seconds} s"
