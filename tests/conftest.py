"""Fixtures on real processes: `infra` (NATS, PostgreSQL, S3) for service tests, `stack` for e2e tests."""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from devstack.infra import pg_system_user, remove_system_user
from shared.bus import BusClient
from tests.support.compose import ComposeStack, compose_approved_roots, compose_stack_url
from tests.support.containers import container_choice, container_infra
from tests.support.fake_openai import running as fake_openai_server
from tests.support.infra import Infra, local_infra
from tests.support.stack import ROOT_SCOPE, STARTED_HOMES, RunningStack, external_stack, start_stack, stop_stack

HomeFactory = Callable[[str], Path]


@pytest.fixture(scope="session")
def dossier_homes() -> Iterator[HomeFactory]:
    """New folders for a $DOSSIER_HOME (0700, like `mkdtemp` makes them), under one root removed at the end,
    with the system user each one's Postgres ran as (as root)."""
    root = Path(tempfile.mkdtemp(prefix="dossier-tests-"))
    made: list[Path] = []

    def make(name: str) -> Path:
        made.append(Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root)))
        return made[-1]

    try:
        yield make
    finally:
        shutil.rmtree(root, ignore_errors=True)
        forget_homes(made)


@pytest.fixture(scope="session", autouse=True)
def _forget_stack_homes() -> Iterator[None]:
    yield
    forget_homes(STARTED_HOMES)


def forget_homes(homes: list[Path]) -> None:
    if os.geteuid() == 0:
        for home in homes:
            remove_system_user(pg_system_user(home))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--corpus",
        default=None,
        metavar="DIR",
        help="a folder of real-world documents with its MANIFEST.tsv: collects the corpus checks (make test-corpus)",
    )


# Modules that read a document corpus from outside the repository: collected only with --corpus, so a clone
# with nothing beside it runs the whole suite, and the corpus run (make test-corpus) cannot pass without one.
CORPUS_MODULES = ("test_corpus.py",)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name in CORPUS_MODULES and not config.getoption("corpus"):
        return True
    return None


def pytest_report_header() -> str:
    choice = container_choice()
    where = "containers" if choice.containers else "local processes"
    return f"service-test infra: {where}, because {choice.reason}"


@pytest.fixture(scope="session")
def infra(dossier_homes: HomeFactory) -> Iterator[Infra]:
    choice = container_choice()
    if choice.containers:
        with container_infra(dossier_homes("infra")) as value:
            yield value
    else:
        # Also said in the header; a warning reaches the summary of runs that hide it (-q).
        warnings.warn(f"service-test infra: local processes, because {choice.reason}", stacklevel=1)
        with local_infra(dossier_homes("infra")) as value:
            yield value


@pytest.fixture
async def bus(infra: Infra) -> AsyncIterator[BusClient]:
    nc = await infra.connect()
    try:
        yield BusClient(nc, timeout=5.0, signer=infra.signer())
    finally:
        await nc.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Against the compose stack, the tests marked `local_stack` (they need the local stack's internals or
    start stacks of their own) are deselected, never skipped: `make test` runs them. Against the local
    stack, those marked `compose_backup` (they back the compose stack up) are: `make test-containers`
    runs them."""
    other = "local_stack" if compose_stack_url() else "compose_backup"
    kept = [item for item in items if item.get_closest_marker(other) is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


@pytest.fixture(scope="module")
def model_server() -> Iterator[str]:
    """The fake OpenAI-compatible server (tests/support/fake_openai.py) of one module's stack."""
    with fake_openai_server() as url:
        yield url


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory, dossier_homes: HomeFactory) -> Iterator[RunningStack]:
    """One whole stack for all e2e tests of the session; tests isolate themselves by scope.

    With DOSSIER_TEST_STACK_URL, DOSSIER_TEST_STACK_ADMIN_TOKEN, DOSSIER_TEST_STACK_PROJECT and
    DOSSIER_TEST_STACK_ENV_FILE, the compose stack of `make test-containers` instead: the same tests run
    against it, but for those marked `local_stack`."""
    url = compose_stack_url()
    if url:
        compose = ComposeStack.from_env(
            os.environ["DOSSIER_TEST_STACK_PROJECT"], os.environ["DOSSIER_TEST_STACK_ENV_FILE"]
        )
        running = external_stack(url, os.environ["DOSSIER_TEST_STACK_ADMIN_TOKEN"], compose)
        running.approved_roots = compose_approved_roots()
        yield running
        return
    docs, private = tmp_path_factory.mktemp("approved-docs"), tmp_path_factory.mktemp("approved-private")
    # `docs` for every scope; `private` for the scope ROOT_SCOPE alone.
    roots = f"docs={docs},{ROOT_SCOPE}/private={private}"
    running = start_stack(dossier_homes("stack-home"), extra_env={"DOSSIER_APPROVED_ROOTS": roots})
    running.approved_roots = {"docs": docs, "private": private}
    try:
        yield running
    finally:
        stop_stack(running.proc)
