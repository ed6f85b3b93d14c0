#!/bin/sh
# Restores an archive of compose-backup.sh into a compose project that has nothing yet (no containers,
# empty volumes), and starts it (docs/operations.md, "Backup and restore"):
#   sh deploy/compose-restore.sh [--env-file FILE] ARCHIVE
# from the folder of docker-compose.yml, with the new project's COMPOSE_PROJECT_NAME and COMPOSE_FILE if
# it has them. FILE (default ./.env) must not exist: the archive's .env is written there, since the data
# needs its secrets.
#
# The archive is checked whole first (it decodes; plain files and folders only; every file as SHA256SUMS
# says, none missing or added; PostgreSQL's major version the same as the postgres image's), and the
# project's postgres and NATS volumes must be empty; a refusal exits 2 before anything is written in a
# volume (and takes back the .env it wrote). Then: the objects into the store (shared/objectcopy.py,
# which refuses a bucket that holds any), the cluster into the postgres volume, the cluster started alone
# to mark for publishing again the events no consumer had applied (shared/redelivery.py: the new NATS
# volume starts with an empty stream), and the whole deployment up, until the gateway is healthy.
set -eu
PROG=compose-restore
. "$(dirname "$0")/compose-lib.sh"
read_arguments "$@"
[ -f "$ARCHIVE" ] || die "$ARCHIVE: no such file" 2
[ ! -e "$ENV_FILE" ] && [ ! -L "$ENV_FILE" ] ||
  die "$ENV_FILE exists: the restore writes the archive's .env there (restore into a new project)" 2

umask 077
staging=$(mktemp -d "$(dirname "$ENV_FILE")/.dossier-restore.XXXXXX")
touched=0
finish() {
  status=$?
  rm -rf "$staging"
  if [ "$status" != 0 ]; then
    if [ "$touched" = 0 ]; then
      rm -f "$ENV_FILE"
    else
      echo "$PROG: failed after it had begun on the project; remove what it made before another try:" \
        "$COMPOSE --env-file $ENV_FILE down -v" >&2
    fi
  fi
  exit "$status"
}
trap finish EXIT
trap 'exit 130' INT TERM

unusable() {
  die "$ARCHIVE is not a usable backup: $1" 2
}
unpacked=$(tar -xzf "$ARCHIVE" -C "$staging" --no-same-owner 2>&1) || unusable "$unpacked"
[ -z "$(find "$staging" ! -type f ! -type d)" ] || unusable "it holds entries that are neither files nor folders"
for name in SHA256SUMS manifest.json env postgres.tar; do
  [ -f "$staging/$name" ] || unusable "$name is missing"
done
grep -q '"kind": "compose"' "$staging/manifest.json" || unusable "it was not made by compose-backup.sh"
(cd "$staging" && sha256sum --quiet --strict -c SHA256SUMS >/dev/null 2>&1) ||
  unusable "a file differs from its SHA-256 in SHA256SUMS"
listed=$(wc -l <"$staging/SHA256SUMS")
present=$(cd "$staging" && find . -type f ! -path ./SHA256SUMS -print0 | tr -cd '\0' | wc -c)
[ "$listed" -eq "$present" ] || unusable "it holds $present files where SHA256SUMS lists $listed"
mkdir -p "$staging/objects"

cp "$staging/env" "$ENV_FILE"
load_env
[ -z "$(dc ps -q)" ] || die "the project has containers: a restore starts a new project" 2
major=$(tar -xOf "$staging/postgres.tar" PG_VERSION)
version=$(dc run --rm -T --no-deps --entrypoint postgres postgres --version) ||
  die "the postgres image does not run here (is it built or pulled?)" 2
image_major=$(echo "$version" | sed -n 's/.*(PostgreSQL) \([0-9][0-9]*\).*/\1/p')
[ "$major" = "$image_major" ] || die "the archive holds a PostgreSQL $major cluster and the postgres image runs \
PostgreSQL $image_major: a physical copy opens only under the major version that made it" 2
dc run --rm -T --no-deps --entrypoint sh postgres -c '[ ! -e /var/lib/postgresql/data/PG_VERSION ]' ||
  die "the project's postgres volume holds a cluster: a restore fills empty volumes" 2
dc run --rm -T --no-deps --entrypoint sh nats -c '[ -z "$(ls -A /data)" ]' ||
  die "the project's NATS volume is not empty: a restored deployment starts with an empty event stream" 2

touched=1
dc up -d minio
wait_healthy minio
objectcopy "$staging" import /backup/objects
# As root: the folder of the archive is this user's alone, and the cluster's files become postgres's.
dc run --rm -T --no-deps -u root -v "$staging:/backup:ro" --entrypoint sh postgres -c \
  'cd /var/lib/postgresql/data && tar -xf /backup/postgres.tar && chown -R postgres:postgres . && chmod 700 .'
# The image finds PG_VERSION and starts the copy as it is (no init scripts: the roles are in it).
dc up -d postgres
wait_healthy postgres
export PGPASSWORD="$POSTGRES_PASSWORD"
dsn() { echo "postgresql://postgres@postgres:5432/$1"; }
# shellcheck disable=SC2046
dc run --rm -T --no-deps -e PGPASSWORD "$TOOL_SERVICE" python -m shared.redelivery --inbox "$(dsn workspace)" \
  $(for db in gateway workspace runhost publication artifact assets; do dsn "$db"; done)
dc up -d
wait_healthy gateway
created=$(sed -n 's/.*"created_at": "\([^"]*\)".*/\1/p' "$staging/manifest.json")
echo "$PROG: restored the backup of $created ($(find "$staging/objects" -type f | wc -l) objects); the gateway is healthy"
