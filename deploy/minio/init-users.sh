#!/bin/sh
# Runs once per `compose up` in the minio/mc image: the bucket (private: no anonymous access), one user
# per service with the dossier-objects policy (that bucket only, no bucket or admin operations).
set -eu
# The local S3 image (deploy/containers/s3.Dockerfile) has no admin API and no mc: it makes the bucket
# and the same users from its own environment when it starts, so there is nothing left to do here.
if ! command -v mc >/dev/null 2>&1; then
  echo "no mc here: the S3 server made its bucket and users itself"
  exit 0
fi
mc alias set local http://minio:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD"
mc mb --ignore-existing local/dossier
mc anonymous set none local/dossier
mc admin policy create local dossier-objects /deploy/minio/dossier-objects.json
for service in gateway runhost artifact assets; do
  var="S3_$(echo "$service" | tr '[:lower:]' '[:upper:]')_SECRET"
  eval secret="\$$var"
  mc admin user add local "dossier-$service" "$secret"
  mc admin policy attach local dossier-objects --user "dossier-$service" || true
done
