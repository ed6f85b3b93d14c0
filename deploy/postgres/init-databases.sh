#!/usr/bin/env bash
# Runs once, on the first start of the postgres container: one login role per Dossier service with its
# own password (PG_<SERVICE>_PASSWORD), owning only its own database; no one else may connect to it.
set -euo pipefail
for db in gateway workspace runhost publication artifact assets; do
  var="PG_${db^^}_PASSWORD"
  psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    -v role="$db" -v password="${!var:?set $var}" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN NOCREATEDB PASSWORD %L', :'role', :'password')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'role', :'role')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'role') \gexec
SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', :'role') \gexec
SQL
done
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -c 'REVOKE CONNECT ON DATABASE postgres FROM PUBLIC' -c 'REVOKE CONNECT ON DATABASE template1 FROM PUBLIC'
