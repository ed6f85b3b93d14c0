PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup bytecode up test test-corpus test-containers images lint check-asyncapi bench bench-growth generated

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# The pip bundled with Python 3.11 (23.2) has an older resolver; a current one installs the set reliably.
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade 'pip>=25'
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,local]'
	touch $(STAMP)

# The project's own modules as bytecode: the editable install leaves them uncompiled, a parser (run with -B)
# never writes its own, and where PYTHONDONTWRITEBYTECODE is set no process writes any, so every process of a
# stack would compile them again at each start. Only what changed since the last time is compiled again.
bytecode: setup
	$(PY) -m compileall -q services shared devstack dossier_cli

up: bytecode
	$(PY) -m devstack.stack

# Three pytest sessions at a time, as the two cores stay about half idle under one, each with a temporary
# root and stacks of its own: most of the e2e suite (its output shown as it goes); beside it the unit and
# service tests with the e2e modules in E2E_BESIDE (the browser's, the backup's, the fuzzer's: about as long
# as the rest of that suite leaves); and the e2e tests marked `waits` (pyproject.toml: the NATS outage's
# three minutes, a model's minute of 503s, leases running out), which mostly wait on clocks. The output of
# the two sessions beside follows the first. `make test` fails if any session fails.
E2E_BESIDE := tests/e2e/web tests/e2e/test_backup.py tests/e2e/test_schemathesis.py

test: bytecode
	@tmp=$$(mktemp -d); \
	echo "== the unit and service tests with $(E2E_BESIDE), and the e2e tests marked waits, run beside the e2e suite: their output follows it"; \
	$(PY) -m pytest -p no:cacheprovider --basetemp=$$tmp/rest --durations=20 -m "not waits" tests/unit tests/service $(E2E_BESIDE) >$$tmp/rest.log 2>&1 & rest=$$!; \
	$(PY) -m pytest -p no:cacheprovider --basetemp=$$tmp/waits --durations=10 -m waits tests/e2e >$$tmp/waits.log 2>&1 & waits=$$!; \
	$(PY) -m pytest --durations=30 -m "not waits" tests/e2e $(foreach path,$(E2E_BESIDE),--ignore=$(path)); e2e=$$?; \
	wait $$rest; rest=$$?; wait $$waits; waits=$$?; \
	echo "== the unit and service tests with $(E2E_BESIDE), run beside the e2e suite:"; cat $$tmp/rest.log; \
	echo "== the tests marked waits, run beside the e2e suite:"; cat $$tmp/waits.log; rm -rf $$tmp; \
	test $$e2e -eq 0 && test $$rest -eq 0 && test $$waits -eq 0

# The real-world document corpus (docs/contributing.md says what it holds): a folder outside the repository,
# so `make test` never needs it, and this target fails when it is not given or not there.
test-corpus: bytecode
	@test -n "$(DOSSIER_CORPUS)" || { echo "make test-corpus needs DOSSIER_CORPUS=DIR, a folder with MANIFEST.tsv" >&2; exit 2; }
	$(PY) -m pytest --corpus="$(DOSSIER_CORPUS)" tests/service/assets/test_corpus.py

# The images of deploy/containers (a Debian base from debootstrap; NATS, PostgreSQL, S3, Dossier):
# for compose and the container tests where no registry is reachable. Root, debootstrap and a Docker engine.
images:
	sh deploy/containers/build-images.sh

# The images, the whole stack in docker compose, the e2e suite against it (but the tests marked
# local_stack), down.
# (`make test` then runs the service tests in containers when the images are present and selected.)
test-containers: setup
	PY=$(PY) sh deploy/containers/test-containers.sh

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy shared services dossier_cli devstack clients/python/dossier_client

# The official AsyncAPI CLI's verdict on docs/asyncapi.json (npm install -g @asyncapi/cli@4; CI installs it).
check-asyncapi:
	ASYNCAPI_METRICS=false asyncapi validate docs/asyncapi.json --fail-severity=info

bench: bytecode
	for b in bench/[a-z]*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# The growth goals at full size (several minutes): evidence search at 1,000,000 passages and the catalog
# of a workspace with 1,000,000 associations against one with 100; each prints its GOAL line.
GROWTH := 1000000
bench-growth: bytecode
	$(PY) bench/ingest.py --search-only --passages $(GROWTH)
	$(PY) bench/catalog.py --large $(GROWTH)

generated: setup
	$(PY) -m devstack.generated
