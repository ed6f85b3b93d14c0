#!/bin/sh
# Runs once per `compose up` in the minio/mc image: the bucket (private: no anonymous access), one user
# per service with its own policy (deploy/minio/policies/<service>.json, from shared/objectkeys.py: its
# own key prefixes only, no listing, no bucket or admin operations).
set -eu
# The local S3 image (deploy/containers/s3.Dockerfile) has no admin API and no mc: it makes the bucket
# and the same users, with the same prefix rules, from its own environment when it starts.
if ! command -v mc >/dev/null 2>&1; then
  echo "no mc here: the S3 server made its bucket and users itself"
  exit 0
fi
mc alias set local http://minio:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD"
mc mb --ignore-existing local/dossier
mc anonymous set none local/dossier
for service in gateway runhost artifact assets; do
  var="S3_$(echo "$service" | tr '[:lower:]' '[:upper:]')_SECRET"
  eval secret="\$$var"
  mc admin policy create local "dossier-$service" "/deploy/minio/policies/$service.json"
  mc admin user add local "dossier-$service" "$secret"
  # A user made by an earlier version still has the shared dossier-objects policy: replace it.
  mc admin policy detach local dossier-objects --user "dossier-$service" >/dev/null 2>&1 || true
  mc admin policy attach local "dossier-$service" --user "dossier-$service" || true
done
