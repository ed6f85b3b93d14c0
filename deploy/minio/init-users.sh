#!/bin/sh
# Runs once per `compose up` in the minio/mc image: the bucket (private: no anonymous access), one user
# per service with the dossier-objects policy (that bucket only, no bucket or admin operations).
set -eu
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
