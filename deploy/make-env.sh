#!/bin/sh
# Writes ./.env with every secret docker-compose.yml asks for, each new and random (mode 0600).
# Run once from the repository root: `sh deploy/make-env.sh`. It never overwrites an existing .env.
set -eu
[ -e .env ] && { echo ".env exists; not overwriting it" >&2; exit 1; }
umask 077
rand() { head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 40; }
# NATS keeps only bcrypt hashes; single quotes keep compose from reading the hash's `$` as variables.
PYTHON=${PYTHON:-.venv/bin/python}
nats_user() { pw=$(rand); echo "NATS_$1_PASSWORD=$pw"; echo "NATS_$1_PASSWORD_HASH='$(echo "$pw" | "$PYTHON" -m shared.natsauth hash)'"; }
{
  echo "DOSSIER_BUS_SECRET=$(rand)"
  echo "DOSSIER_ADMIN_TOKEN=adm_$(rand)"
  echo "POSTGRES_PASSWORD=$(rand)"
  echo "MINIO_ROOT_USER=dossier-root"
  echo "MINIO_ROOT_PASSWORD=$(rand)"
  for s in GATEWAY WORKSPACE RUNHOST PUBLICATION ARTIFACT ASSETS; do
    nats_user "$s"
    echo "PG_${s}_PASSWORD=$(rand)"
  done
  nats_user EVENTS
  nats_user OUTSIDE
  for s in GATEWAY RUNHOST ARTIFACT ASSETS; do echo "S3_${s}_SECRET=$(rand)"; done
} > .env
echo "wrote .env"
