#!/bin/sh
# `make test-containers`: the whole stack in containers, really started. Builds the images that are
# missing (build-images.sh; Dossier's own always, from the current source), starts docker-compose.yml
# (with test-stack.yml over it) under a project of its own with new secrets, waits for every
# healthcheck, runs the e2e suite against it (all but the tests marked `local_stack`, and one browser
# test), then the backup test (it backs the stack up, takes it down and restores it into a new project),
# and stops and removes both (volumes too) whatever happened. The service tests take the same images through testcontainers in `make
# test` whenever the engine answers and the images are present (CI runs this script first, then that).
# Needs a Docker engine, debootstrap (for a first build) and compose (`docker compose` or
# Debian's docker-compose).
set -eu
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
set -a
. deploy/containers/local-images.env
set +a
sh deploy/containers/build-images.sh

if docker compose version >/dev/null 2>&1; then compose="docker compose"; else compose=docker-compose; fi
work=.dossier/test-containers
rm -rf "$work" && mkdir -p "$work"
(cd "$work" && sh ../../deploy/make-env.sh)
# The approved import roots test-stack.yml mounts into the assets container; the tests write into them.
DOSSIER_TEST_STACK_ROOTS=$PWD/$work/roots
mkdir -p "$DOSSIER_TEST_STACK_ROOTS/docs" "$DOSSIER_TEST_STACK_ROOTS/private"
export DOSSIER_TEST_STACK_ROOTS
project=dossier-test-$$
DOSSIER_PUBLISH_PORT=$($PY -c 'from devstack.procs import free_port; print(free_port())')
export DOSSIER_PUBLISH_PORT
# Read by compose, and by the backup test's scripts (deploy/compose-backup.sh, compose-restore.sh).
COMPOSE_FILE=docker-compose.yml:deploy/containers/test-stack.yml
export COMPOSE_FILE
run_compose() {
  $compose --env-file "$work/.env" -p "$project" "$@"
}
# The project the backup test restores into (tests/e2e/test_compose_backup.py), with the same .env.
restored() {
  $compose --env-file "$work/.env" -p "$project-restored" "$@"
}
stop() {
  status=$?
  [ "$status" = 0 ] || run_compose logs --no-color --tail 100 || true
  [ "$status" = 0 ] || restored logs --no-color --tail 100 || true
  run_compose down -v --remove-orphans || true
  restored down -v --remove-orphans || true
  exit "$status"
}
trap stop EXIT
trap 'exit 130' INT TERM

started=$(date +%s)
run_compose up -d
url=http://127.0.0.1:$DOSSIER_PUBLISH_PORT
# Compose has started the services once their engines were healthy; the gateway answers once every
# service does (its health asks each one).
healthy() {
  $PY - "$url" <<'PY'
import sys, time, urllib.request
deadline = time.monotonic() + 180
while True:
    try:
        with urllib.request.urlopen(sys.argv[1] + "/v1/health", timeout=5) as r:
            if r.status == 200:
                break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("the stack in compose did not become healthy within 180 s")
    time.sleep(1)
PY
}
healthy
echo "test-containers: compose up and healthy in $(($(date +%s) - started)) s"
e2e() {
  DOSSIER_TEST_STACK_URL=$url \
  DOSSIER_TEST_STACK_ADMIN_TOKEN=$(sed -n 's/^DOSSIER_ADMIN_TOKEN=//p' "$work/.env") \
  DOSSIER_TEST_STACK_PROJECT=$project \
  DOSSIER_TEST_STACK_ENV_FILE=$work/.env \
    $PY -m pytest -p no:cacheprovider --durations=10 "$@"
}
# The suite's tests marked `local_stack` are deselected (tests/conftest.py); of the browser tests, one.
# Those marked `paced` (a run killed mid-way) come last, once the run host is recreated with paced steps:
# paced throughout, the suite's long runs would take minutes more.
tested=$(date +%s)
e2e -m "not paced and not compose_backup" tests/e2e/test_*.py \
  tests/e2e/web/test_answers.py::test_an_answer_is_rendered_markdown_with_linked_citations
DOSSIER_TEST_STEP_DELAY_SECONDS=0.1 run_compose up -d --no-deps runhost
healthy
e2e -m paced tests/e2e
echo "test-containers: e2e suite against compose in $(($(date +%s) - tested)) s"
# Last, as it takes the stack down: data written, backed up, the project down with its volumes, restored
# into a new project and read back (deploy/compose-backup.sh, deploy/compose-restore.sh).
backed_up=$(date +%s)
e2e -m compose_backup tests/e2e/test_compose_backup.py
echo "test-containers: compose backup, down and restore in $(($(date +%s) - backed_up)) s"
run_compose down -v --remove-orphans
trap - EXIT
echo "test-containers: compose up, e2e suite and down in $(($(date +%s) - started)) s"
