#!/bin/sh
# Writes deploy/k8s/secrets/: each process's own credentials, the NATS users' passwords and the route
# certificates of the NATS cluster's own CA (mode 0600, never committed). Never overwrites them.
# Usage: PG_HOST=db.internal:5432 sh deploy/k8s/make-secrets.sh
set -eu
cd "$(dirname "$0")"
[ -e secrets ] && { echo "deploy/k8s/secrets exists; not overwriting it" >&2; exit 1; }
: "${PG_HOST:?set PG_HOST (host:port of the managed PostgreSQL)}"
umask 077
mkdir secrets
rand() { head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 40; }
# Proof of caller: an Ed25519 key per signer, raw 32 bytes base64url (shared/proof.py); every process
# gets the public keys, a signer its own private key only.
raw32() { tail -c 32 | base64 | tr '+/' '-_' | tr -d '=\n'; }
public=""
for s in gateway runhost workspace; do
  openssl genpkey -algorithm ed25519 -out "secrets/proof-$s.pem"
  public="$public${public:+,}$s=$(openssl pkey -in "secrets/proof-$s.pem" -pubout -outform DER | raw32)"
done
# The NATS nodes get bcrypt hashes only (in double quotes, as NATS reads a variable's value as config).
PYTHON=${PYTHON:-../../.venv/bin/python}
nats_hash() { echo "$1" | (cd ../.. && "$PYTHON" -m shared.natsauth hash); }
: > secrets/nats-users.env
# Every process's /metrics wants this bearer token (the scraper's), the gateway's included.
metrics=$(rand)
echo "$metrics" > secrets/metrics-token
for s in gateway workspace runhost publication artifact assets; do
  nats=$(rand); pg=$(rand)
  echo "NATS_$(echo $s | tr a-z A-Z)_PASSWORD_HASH=$(nats_hash "$nats")" >> secrets/nats-users.env
  {
    echo "DOSSIER_NATS_PASSWORD=$nats"
    echo "DOSSIER_DATABASE_URL=postgresql://$s:$pg@$PG_HOST/$s"
    case $s in gateway|runhost|artifact|assets) echo "DOSSIER_S3_SECRET_KEY=$(rand)";; esac
    echo "DOSSIER_PROOF_PUBLIC_KEYS=$public"
    case $s in gateway|runhost|workspace)
      echo "DOSSIER_PROOF_KEY=$(openssl pkey -in "secrets/proof-$s.pem" -outform DER | raw32)";;
    esac
    case $s in gateway) echo "DOSSIER_ADMIN_TOKEN=adm_$(rand)";; esac
    echo "DOSSIER_METRICS_TOKEN=$metrics"
  } > "secrets/$s.env"
done
events=$(rand); outside=$(rand)
echo "NATS_EVENTS_PASSWORD_HASH=$(nats_hash "$events")" >> secrets/nats-users.env
echo "NATS_OUTSIDE_PASSWORD_HASH=$(nats_hash "$outside")" >> secrets/nats-users.env
# The outside subscribers' password (hand it to them with the servers) and the mirror's declarer.
echo "NATS_EVENTS_PASSWORD=$events" > secrets/events.env
echo "DOSSIER_NATS_PASSWORD=$outside" > secrets/outside.env
rm secrets/proof-*.pem
cd secrets
openssl req -x509 -newkey rsa:4096 -nodes -keyout ca.key -out ca.crt -days 825 -subj "/CN=dossier-nats-ca" 2>/dev/null
openssl req -newkey rsa:4096 -nodes -keyout route.key -out route.csr -subj "/CN=nats" \
  -addext "subjectAltName=DNS:nats-0.nats,DNS:nats-1.nats,DNS:nats-2.nats" 2>/dev/null
openssl x509 -req -in route.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out route.crt -days 825 -copy_extensions copy 2>/dev/null
echo "wrote deploy/k8s/secrets/ (set each PG role's password from the DATABASE_URLs; the S3 keys in the object store)"
