# Sourced by compose-backup.sh and compose-restore.sh: compose as the deployment's project sees it. Run
# from the folder of docker-compose.yml; compose reads COMPOSE_PROJECT_NAME and COMPOSE_FILE as always,
# and the scripts give it the .env they were given (--env-file).

# `docker compose` (v2) where the CLI has it, else Debian's docker-compose (v1).
if docker compose version >/dev/null 2>&1; then COMPOSE="docker compose"; else COMPOSE=docker-compose; fi
# The service whose image (Dossier's) runs the one-off Python tools; any of the six would do.
TOOL_SERVICE=workspace
WAIT_SECONDS=${DOSSIER_COMPOSE_WAIT_SECONDS:-180}

die() {
  echo "$PROG: $1" >&2
  exit "${2:-1}"
}

absolute() {
  case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac
}

# The scripts' one form, `[--env-file FILE] ARCHIVE`: sets ENV_FILE and ARCHIVE, as absolute paths.
read_arguments() {
  ENV_FILE=.env
  while [ $# -gt 0 ]; do
    case $1 in
      --env-file) [ $# -ge 2 ] || die "--env-file needs a FILE" 2; ENV_FILE=$2; shift 2 ;;
      -h | --help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
      -*) die "unknown option $1" 2 ;;
      *) break ;;
    esac
  done
  [ $# -eq 1 ] || die "usage: sh $0 [--env-file FILE] ARCHIVE" 2
  ENV_FILE=$(absolute "$ENV_FILE")
  ARCHIVE=$(absolute "$1")
}

dc() {
  $COMPOSE --env-file "$ENV_FILE" "$@"
}

# The id of the service's one container, or nothing.
container() {
  dc ps -q "$1" 2>/dev/null | head -n 1
}

# Until the service's container reports healthy (its compose healthcheck), up to WAIT_SECONDS.
wait_healthy() {
  deadline=$(($(date +%s) + WAIT_SECONDS))
  id=$(container "$1")
  [ -n "$id" ] || die "$1 has no container"
  while :; do
    status=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$id")
    [ "$status" = healthy ] && return 0
    [ "$(date +%s)" -lt "$deadline" ] || die "$1 did not become healthy within $WAIT_SECONDS s (status: $status)"
    sleep 1
  done
}

# The secrets of the .env as this shell's variables (the object store's root key, the superuser's password).
load_env() {
  set -a
  # shellcheck disable=SC1090
  . "$ENV_FILE"
  set +a
}

# Dossier's image, run once beside the deployment (on its network, no dependencies started) with the
# object store's root key: the only key that may list the bucket (shared/objectkeys.py). The secret
# reaches the container from this process's environment, never from a command line.
objectcopy() {
  folder=$1
  shift
  export DOSSIER_S3_ACCESS_KEY="$MINIO_ROOT_USER" DOSSIER_S3_SECRET_KEY="$MINIO_ROOT_PASSWORD"
  dc run --rm -T --no-deps -u "$(id -u):$(id -g)" -v "$folder:/backup" \
    -e DOSSIER_S3_ACCESS_KEY -e DOSSIER_S3_SECRET_KEY "$TOOL_SERVICE" python -m shared.objectcopy "$@"
}
