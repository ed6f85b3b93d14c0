#!/bin/sh
# Writes ./.env with every secret docker-compose.yml asks for, each new and random (mode 0600).
# Run once from the repository root: `sh deploy/make-env.sh`. It never overwrites an existing .env.
set -eu
[ -e .env ] && { echo ".env exists; not overwriting it" >&2; exit 1; }
umask 077
rand() { head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 40; }
# An Ed25519 key as shared/proof.py reads it: the raw 32 bytes (the seed, or the public key), base64url.
raw32() { tail -c 32 | base64 | tr '+/' '-_' | tr -d '=\n'; }
keys=$(mktemp -d); trap 'rm -rf "$keys"' EXIT
public=""
for s in gateway runhost workspace; do
  openssl genpkey -algorithm ed25519 -out "$keys/$s.pem"
  public="$public${public:+,}$s=$(openssl pkey -in "$keys/$s.pem" -pubout -outform DER | raw32)"
done
# NATS keeps only bcrypt hashes; single quotes keep compose from reading the hash's `$` as variables.
PYTHON=${PYTHON:-$(dirname "$0")/../.venv/bin/python}
nats_user() {
  pw=$(rand)
  hash=$(echo "$pw" | "$PYTHON" -m shared.natsauth hash)  # an assignment: a failure stops the script (set -e)
  echo "NATS_$1_PASSWORD=$pw"
  echo "NATS_$1_PASSWORD_HASH='$hash'"
}
{
  for s in gateway runhost workspace; do
    echo "PROOF_$(echo $s | tr a-z A-Z)_KEY=$(openssl pkey -in "$keys/$s.pem" -outform DER | raw32)"
  done
  echo "DOSSIER_PROOF_PUBLIC_KEYS=$public"
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
