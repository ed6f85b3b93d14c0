#!/bin/bash
# The part of the official postgres image's entry point that Dossier relies on, for Debian's package:
# on an empty $PGDATA, initdb with the superuser $POSTGRES_USER (default postgres) and its password
# $POSTGRES_PASSWORD (required), every login by password ($POSTGRES_HOST_AUTH_METHOD, default
# scram-sha-256, for the socket too unless $POSTGRES_INITDB_ARGS says otherwise), the database
# $POSTGRES_DB, then /docker-entrypoint-initdb.d/*.sh and *.sql against a server reachable only on its
# socket. Then the server listens on every interface of the container.
set -euo pipefail
if [ "${1:-postgres}" != postgres ]; then exec "$@"; fi
[ $# -gt 0 ] && shift
user=${POSTGRES_USER:-postgres}
method=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  # Word splitting of POSTGRES_INITDB_ARGS is intended: it holds several options.
  # shellcheck disable=SC2086
  initdb -D "$PGDATA" --username="$user" --pwfile="$pwfile" --encoding=UTF8 --locale=C.UTF-8 \
    --auth="$method" ${POSTGRES_INITDB_ARGS:-}
  rm -f "$pwfile"
  printf 'host all all all %s\n' "$method" >> "$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -w -o "-c listen_addresses=''" start
  export PGPASSWORD=$POSTGRES_PASSWORD PGUSER=$user
  db=${POSTGRES_DB:-$user}
  if [ "$db" != postgres ]; then
    psql -v ON_ERROR_STOP=1 --dbname postgres -v db="$db" <<'SQL'
SELECT format('CREATE DATABASE %I', :'db') \gexec
SQL
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh) echo "running $f"; bash "$f" ;;
      *.sql) echo "running $f"; psql -v ON_ERROR_STOP=1 --dbname "$db" -f "$f" ;;
    esac
  done
  unset PGPASSWORD
  pg_ctl -D "$PGDATA" -w -m fast stop
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
