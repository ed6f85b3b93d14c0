#!/bin/sh
# Builds Dossier's image where no image registry is reachable: a Debian base made from Debian's own
# packages (debootstrap + docker import), then ../../Dockerfile on it. Needs root, debootstrap and a
# Docker engine. pip inside the build reaches PyPI through the host's network and trusts the host's CA
# bundle (a build secret, never a layer).
#   sh deploy/containers/build-images.sh            # dossier-base:bookworm, dossier:latest
set -eu
cd "$(dirname "$0")/../.."
BASE=${DOSSIER_BASE_IMAGE:-dossier-base:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CA=${DOSSIER_BUILD_CA:-/etc/ssl/certs/ca-certificates.crt}
if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" "$MIRROR"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import --change 'CMD ["python3"]' - "$BASE"
fi
DOCKER_BUILDKIT=1 docker build --network host --secret "id=ca,src=$CA" --build-arg "BASE=$BASE" -t dossier:latest .
