#!/usr/bin/env bash
# Runs once, on the first start of the postgres container: one database per Dossier service.
set -euo pipefail
for db in gateway workspace runhost publication artifact assets; do
  psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    -c "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 \
    || psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres -c "CREATE DATABASE \"$db\""
done
