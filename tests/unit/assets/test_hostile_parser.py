"""A parser taken over by a hostile file reaches nothing beyond its own input.

Each attempt runs as code inside a real parser process, confined exactly as production confines it
(tests/support/hostile_parser.py), with the test process as the parser's parent (the service) and a
fake $DOSSIER_HOME beside it. Every attempt must fail; the input of the job must still be readable.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from services.assets.acquisition import _new_temp
from services.assets.confinement import INNER_ID, ROOT, Plan, runtime_paths
from tests.support.hostile_parser import HostileSandbox
from tests.support.probe import probe_until

SECRET_FILES = ("admin-token", "pg-passwords.json", "nats/users.json", "s3-keys.json", "bus-secret")

PAYLOAD = r"""
import ctypes, os, socket

def attempt(name, action):
    try:
        report(name, "reached: " + repr(action())[:200])
    except OSError as exc:
        report(name, "blocked: " + (os.strerror(exc.errno) if exc.errno else str(exc)))

def read(path):
    with open(path, "rb") as f:
        return f.read()

def join_network():
    fd = os.open(f"/proc/{params['parent']}/ns/net", os.O_RDONLY)
    if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) != 0:
        raise OSError(ctypes.get_errno(), "setns")
    return "joined"

def new_user_namespace():
    if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    return "a new user namespace"

def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    return pid

def start_thread():
    import errno, threading
    thread = threading.Thread(target=lambda: None)
    try:
        thread.start()
    except RuntimeError as exc:
        raise OSError(errno.EAGAIN, str(exc))
    thread.join()
    return "started"

attempt("environ", lambda: read(f"/proc/{params['parent']}/environ"))
for path in params["secrets"]:
    attempt("secret " + path, lambda: read(path))
attempt("setns", join_network)
attempt("unshare", new_user_namespace)
attempt("network", lambda: socket.create_connection(("127.0.0.1", params["port"]), timeout=5))
attempt("other job", lambda: read(params["other_job"]))
attempt("other job's folder", lambda: os.listdir(os.path.dirname(params["other_job"])))
attempt("fork", fork)
attempt("write", lambda: open("/written", "wb"))
# PID 1 is the namespace's waiter (unfiltered, it could do what the parser may not).
attempt("pid 1's memory", lambda: open("/proc/1/mem", "r+b"))
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
# PID 1 is its own namespace's waiter (its parent); nothing else may be there.
report("other pids", "reached: " + str(pids) if set(pids) - {1, os.getpid()} else "blocked: only itself")
status = dict(line.split(":", 1) for line in read("/proc/self/status").decode().splitlines() if ":" in line)
for field in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
    report(field, status[field].strip())
report("uid", os.getuid())
report("input", read(str(input_path)).decode())
try:
    report("thread", start_thread())
except OSError as exc:
    report("thread", "refused: " + str(exc))
# What the OCR path does (services.assets.extract.ocr): the thread limit lifted to the hard one the parser set.
import resource
resource.setrlimit(resource.RLIMIT_NPROC, (resource.getrlimit(resource.RLIMIT_NPROC)[1],) * 2)
try:
    report("thread, limit lifted", start_thread())
except OSError as exc:
    report("thread, limit lifted", "failed: " + str(exc))
attempt("fork, limit lifted", fork)
"""


@pytest.fixture(params=["temporary", "checkout"])
def home(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """A $DOSSIER_HOME as the stack writes it (a 0700 folder of 0600 secrets): in a temporary folder, and
    inside the project's checkout, where `make up` puts it (`.dossier`) beside the code the parser imports."""
    root = tmp_path / "home" if request.param == "temporary" else Path(tempfile.mkdtemp(prefix=".dossier-", dir=ROOT))
    try:
        paths = []
        for name in SECRET_FILES:
            path = root / name
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.write_text("secret-value\n")
            path.chmod(0o600)
            paths.append(str(path))
        root.chmod(0o700)
        yield paths
    finally:
        if request.param == "checkout":
            shutil.rmtree(root)


@pytest.fixture
async def listener() -> AsyncIterator[int]:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def staged(text: str) -> Path:
    """A job's input staged as the service stages one (its own 0700 folder)."""
    fd, path = _new_temp()
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


async def attack(sandbox: HostileSandbox, home: list[str], port: int) -> dict[str, str]:
    mine, other = staged("my own input"), staged("another tenant's input")
    try:
        params = {"parent": os.getpid(), "secrets": home, "port": port, "other_job": str(other)}
        return await sandbox.attack(mine, params)
    finally:
        for path in (mine, other):
            path.unlink()
            path.parent.rmdir()


def assert_confined(got: dict[str, str]) -> None:
    reached = {name: outcome for name, outcome in got.items() if outcome.startswith("reached")}
    assert reached == {}
    assert len([name for name in got if name.startswith("secret ")]) == len(SECRET_FILES)
    assert {name for name, outcome in got.items() if outcome.startswith("blocked")} >= {
        "environ", "setns", "unshare", "network", "other job", "other job's folder", "fork", "write", "other pids",
        "pid 1's memory", "fork, limit lifted",
    }  # fmt: skip
    # Threads only once the OCR path lifts the limit (OpenVINO's workers); processes never.
    assert got["thread, limit lifted"] == "started"
    for field in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
        assert got[field] == "0000000000000000", field
    assert (got["NoNewPrivs"], got["Seccomp"]) == ("1", "2")
    assert got["input"] == "my own input"


async def test_a_hostile_parser_reaches_nothing_beyond_its_input(
    home: list[str], listener: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The service's environment holds secrets; the parser must not read them from /proc.
    monkeypatch.setenv("DOSSIER_NATS_PASSWORD", "nats-password-value")
    sandbox = HostileSandbox(PAYLOAD)
    try:
        assert sandbox.problem is None
        got = await attack(sandbox, home, listener)
    finally:
        await sandbox.close()

    assert_confined(got)
    if os.geteuid() == 0:
        # As root: the dedicated system user, not the service's uid; and, being no root, bound by the thread
        # limit (which spares a uid that is root outside its user namespace, as in the next test).
        assert got["uid"] not in ("0", str(os.getuid()))
        assert got["thread"].startswith("refused"), got["thread"]


async def test_the_user_namespace_confinement_holds_as_well(home: list[str], listener: int) -> None:
    """The path a service that is not root takes (a user namespace), forced here whoever runs the test."""
    plan = Plan(userns=True, uid=INNER_ID, gid=INNER_ID, binds=runtime_paths())
    sandbox = HostileSandbox(PAYLOAD, plan=plan)
    try:
        got = await attack(sandbox, home, listener)
    finally:
        await sandbox.close()

    assert_confined(got)
    assert got["uid"] == str(INNER_ID)


# A service that is not root: this process drops to `nobody` (when the test runs as root), decides its
# plan as the service would, and enters the confinement itself, in-process (the interpreter may sit
# where `nobody` cannot exec it, so the payload runs in this already-loaded interpreter).
UNPRIVILEGED = r"""
import ctypes, encodings.idna, json, os, resource, socket, sys
from services.assets import confinement
if os.geteuid() == 0:
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    # As a process started as `nobody` would be (a change of uid made this one non-dumpable, which
    # makes its /proc/self files root's).
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)
params = json.loads(sys.argv[1])
plan = confinement.plan()
print(json.dumps(["plan", str(plan.userns)]), flush=True)
fd = os.open(params.pop("input"), os.O_RDONLY)
confinement.enter(plan)
def report(name, outcome):
    print(json.dumps([name, str(outcome)]), flush=True)
exec(sys.argv[2], {"params": params, "input_path": f"/proc/self/fd/{fd}", "report": report})
"""


async def test_an_unprivileged_service_confines_its_parser_in_a_user_namespace(
    home: list[str], listener: int, tmp_path: Path
) -> None:
    mine, other = staged("my own input"), staged("another tenant's input")
    try:
        if os.geteuid() == 0:
            # Everything the attacker wants belongs to the unprivileged service here: only the confinement
            # stands in the way, not file modes.
            for path in (*home, *(p for f in (mine, other) for p in (f, f.parent))):
                os.chown(path, 65534, 65534)
            for folder in {Path(p).parent for p in home} | {Path(home[0]).parent}:
                os.chown(folder, 65534, 65534)
        params = {"parent": os.getpid(), "secrets": home, "port": listener, "other_job": str(other), "input": str(mine)}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "PYTHONPATH": str(ROOT)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-B", "-c", UNPRIVILEGED, json.dumps(params), PAYLOAD,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd="/",
        )  # fmt: skip
        out, err = await proc.communicate()
    finally:
        for path in (mine, other):
            path.unlink()
            path.parent.rmdir()
    records = [json.loads(line) for line in out.decode().splitlines()]
    assert records[:1] == [["plan", "True"]], err.decode()
    got = dict(records[1:])
    assert_confined(got)
    assert got["uid"] == str(INNER_ID)


async def test_the_confinement_holds_under_a_private_umask(home: list[str], listener: int) -> None:
    """The local stack runs its services with umask 077; the parser's root must still be traversable."""
    old = os.umask(0o077)
    try:
        sandbox = HostileSandbox(PAYLOAD)
        try:
            got = await attack(sandbox, home, listener)
        finally:
            await sandbox.close()
    finally:
        os.umask(old)
    assert_confined(got)


# Lifts the thread limit as the OCR path does, starts threads until refused and holds them until its input
# grows (or 30 s pass).
HOLD_THREADS = r"""
import os, resource, threading, time
resource.setrlimit(resource.RLIMIT_NPROC, (resource.getrlimit(resource.RLIMIT_NPROC)[1],) * 2)
release = threading.Event()
held = 0
while held < 1000:
    try:
        threading.Thread(target=release.wait, daemon=True).start()
    except RuntimeError:
        break
    held += 1
report("held", held)
deadline = time.monotonic() + 30
while os.stat(input_path).st_size < 2 and time.monotonic() < deadline:
    time.sleep(0.05)
release.set()
"""

ONE_THREAD = r"""
import resource, threading
resource.setrlimit(resource.RLIMIT_NPROC, (resource.getrlimit(resource.RLIMIT_NPROC)[1],) * 2)
thread = threading.Thread(target=lambda: None)
try:
    thread.start()
    thread.join()
    report("thread", "started")
except RuntimeError as exc:
    report("thread", "refused: " + str(exc))
"""


def most_threads_below(ancestor: int) -> int:
    """The most threads any process descended from `ancestor` has."""
    parents: dict[int, int] = {}
    threads: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
            parents[int(entry)], threads[int(entry)] = int(fields["PPid"]), int(fields["Threads"])

    def descends(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == ancestor:
                return True
        return False

    return max((count for pid, count in threads.items() if descends(pid)), default=0)


async def test_a_parser_holding_every_thread_it_may_start_takes_none_from_another() -> None:
    """The thread limit the OCR path lifts is counted per parser: one taken over by its file and holding all
    the threads it may start leaves another parser's OCR its own (OpenVINO needs threads to run at all)."""
    holder, other = HostileSandbox(HOLD_THREADS), HostileSandbox(ONE_THREAD)
    held_input, other_input = staged("x"), staged("y")
    try:
        holding = asyncio.create_task(holder.attack(held_input, {}))

        async def holds() -> bool:
            return most_threads_below(os.getpid()) >= 8

        await probe_until(holds, timeout=30)
        got = await other.attack(other_input, {})
        with held_input.open("a") as f:
            f.write("released")
        held = await holding
    finally:
        for sandbox in (holder, other):
            await sandbox.close()
        for path in (held_input, other_input):
            path.unlink()
            path.parent.rmdir()
    assert got == {"thread": "started"}
    # The parser's three processes and what it started make the limit (services.assets.parser).
    assert 8 <= int(held["held"]) <= 16 - 3
