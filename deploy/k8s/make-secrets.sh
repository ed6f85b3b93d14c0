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
# The NATS nodes get bcrypt hashes only (in double quotes, as NATS reads a variable's value as config).
PYTHON=${PYTHON:-../../.venv/bin/python}
nats_hash() { echo "$1" | (cd ../.. && "$PYTHON" -m shared.natsauth hash); }
bus=$(rand)
: > secrets/nats-users.env
for s in gateway workspace runhost publication artifact assets; do
  nats=$(rand); pg=$(rand)
  echo "NATS_$(echo $s | tr a-z A-Z)_PASSWORD_HASH=$(nats_hash "$nats")" >> secrets/nats-users.env
  {
    echo "DOSSIER_NATS_PASSWORD=$nats"
    echo "DOSSIER_DATABASE_URL=postgresql://$s:$pg@$PG_HOST/$s"
    case $s in gateway|runhost|artifact|assets) echo "DOSSIER_S3_SECRET_KEY=$(rand)";; esac
    case $s in runhost|publication|assets) echo "DOSSIER_BUS_SECRET=$bus";; esac
    case $s in gateway) echo "DOSSIER_ADMIN_TOKEN=adm_$(rand)";; esac
  } > "secrets/$s.env"
done
events=$(rand); outside=$(rand)
echo "NATS_EVENTS_PASSWORD_HASH=$(nats_hash "$events")" >> secrets/nats-users.env
echo "NATS_OUTSIDE_PASSWORD_HASH=$(nats_hash "$outside")" >> secrets/nats-users.env
# The outside subscribers' password (hand it to them with the servers) and the mirror's declarer.
echo "NATS_EVENTS_PASSWORD=$events" > secrets/events.env
echo "DOSSIER_NATS_PASSWORD=$outside" > secrets/outside.env
cd secrets
openssl req -x509 -newkey rsa:4096 -nodes -keyout ca.key -out ca.crt -days 825 -subj "/CN=dossier-nats-ca" 2>/dev/null
openssl req -newkey rsa:4096 -nodes -keyout route.key -out route.csr -subj "/CN=nats" \
  -addext "subjectAltName=DNS:nats-0.nats,DNS:nats-1.nats,DNS:nats-2.nats" 2>/dev/null
openssl x509 -req -in route.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out route.crt -days 825 -copy_extensions copy 2>/dev/null
echo "wrote deploy/k8s/secrets/ (set each PG role's password from the DATABASE_URLs; the S3 keys in the object store)"
