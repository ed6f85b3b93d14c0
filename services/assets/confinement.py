"""The parser's confinement: another uid, no capabilities, its own namespaces and a file system of its own.

A parser of hostile files is treated as compromised code. Before it reads its job, the parser process
(`python -m services.assets.parser`) enters this confinement:

- another uid than its service: as root, a uid of its own that no other process has (`_OWN_UIDS` plus the
  pid of the process the service started; no account has it, so it owns nothing) in the group of the system
  user `dossier_parser`; otherwise a new user namespace in which the service's uid is mapped to an
  unprivileged id. Either way what the kernel counts per user (the thread limit of the OCR path,
  services.assets.parser) is the parser's own, not shared with other parsers;
- new mount, PID, IPC, UTS and network namespaces (no network at all, not even a loopback that is up;
  its own /proc, in which no other process is visible);
- a root file system on a read-only tmpfs holding only read-only bind mounts of the Python runtime, the
  virtual environment, the project's code, the system libraries and four device nodes. The job's input
  arrives later as an open descriptor over stdin (services.assets.parser), so no host path is needed;
- no capabilities (effective, permitted, inheritable, ambient and bounding sets emptied), `no_new_privs`,
  and a seccomp allow-list (services.assets.syscalls).

Three processes: the one the service started stays outside and waits; a fork of it is PID 1 of the new
namespaces, builds the root, drops its privileges and waits too; its fork, PID 2, is the parser. The
parser is not PID 1 because the kernel spares a namespace's PID 1 the signals it has no handler for,
SIGXCPU at the CPU limit among them. Each waiter ends as its child ended, so the service still kills
and reaps the process it started and learns how the parser died; a killed waiter takes the rest with it
(parent-death signals, and the end of PID 1 ends its namespace).

`plan()` runs in the service and decides how (or says why it cannot); `enter()` runs in the parser.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import signal
import stat
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from services.assets import syscalls
from services.assets.syscalls import Unconfinable

PARSER_USER = "dossier_parser"
# The id the service's uid becomes inside the parser's user namespace (when the service is not root).
INNER_ID = 1000
# As root, a parser's uid is this plus the pid of the process the service started (pids stay below 2**22):
# far above the ids accounts, systemd's dynamic users and the usual subordinate id ranges are given.
_OWN_UIDS = 1 << 30
ROOT = Path(__file__).resolve().parents[2]
# The project's code the parsers import; nothing else of the checkout (it may hold a $DOSSIER_HOME).
_CODE = ("services", "shared")
_SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/etc/ld.so.cache")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND = 32, 1024, 2048, 4096
_MS_REC, _MS_PRIVATE, _MS_RELATIME = 16384, 1 << 18, 1 << 21
_MNT_DETACH = 2
_PR_SET_DUMPABLE = 4
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 1, 24, 38, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
_CAPSET = {"x86_64": 126, "aarch64": 91}
_CAP_VERSION_3 = 0x20080522


@dataclass(frozen=True)
class Plan:
    """How the parser is confined: `uid`/`gid` to become as root, or a user namespace (`userns`).

    As root, `uid` is the first of the parsers' own uids (`enter` adds its pid) and `gid` the group of the
    system user `dossier_parser`."""

    userns: bool
    uid: int
    gid: int
    binds: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        return cls(bool(data["userns"]), int(data["uid"]), int(data["gid"]), tuple(data["binds"]))


def plan() -> Plan:
    """Decided in the service: as root, the dedicated system user (created on first use); otherwise a user
    namespace. Raises Unconfinable when neither can work here."""
    machine = platform.machine()
    if sys.platform != "linux" or machine not in _PIVOT_ROOT:
        raise Unconfinable(f"parser confinement needs Linux on x86_64 or aarch64 (this is {sys.platform} {machine})")
    syscalls.check_available()
    binds = runtime_paths()
    if os.geteuid() == 0:
        _, gid = parser_user()
        return Plan(userns=False, uid=_OWN_UIDS, gid=gid, binds=binds)
    with contextlib.suppress(OSError, ValueError):
        if int(Path("/proc/sys/user/max_user_namespaces").read_text()) == 0:
            raise Unconfinable(
                "user namespaces are disabled (user.max_user_namespaces = 0) and the service is not root"
            )
    return Plan(userns=True, uid=INNER_ID, gid=INNER_ID, binds=binds)


def parser_user() -> tuple[int, int]:
    """The parser's system user, created like the stack's PostgreSQL user: no home, no shell, owning nothing."""
    import pwd
    import subprocess

    try:
        entry = pwd.getpwnam(PARSER_USER)
    except KeyError:
        argv = ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent"]
        try:
            subprocess.run([*argv, "--shell", "/usr/sbin/nologin", PARSER_USER], check=True, capture_output=True)
            entry = pwd.getpwnam(PARSER_USER)
        except (OSError, subprocess.CalledProcessError, KeyError) as exc:
            raise Unconfinable(f"the parser's system user {PARSER_USER!r} cannot be created: {exc}") from exc
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise Unconfinable(f"the parser's system user {PARSER_USER!r} must not be root")
    return entry.pw_uid, entry.pw_gid


def runtime_paths() -> tuple[str, ...]:
    """What the parser's file system holds, read-only: the interpreter's prefix, the virtual environment,
    the project's code and the system libraries (real paths; symlinked ones are recreated as links)."""
    wanted = sorted({sys.base_prefix, sys.prefix, *(str(ROOT / name) for name in _CODE), *_SYSTEM})
    kept: list[str] = []
    for path in wanted:
        # A folder inside one already bound (the interpreter in /usr) comes with it.
        if os.path.lexists(path) and not any(path.startswith(parent + "/") for parent in kept):
            kept.append(path)
    return tuple(kept)


# -- in the parser process ------------------------------------------------------------------------------


def enter(confinement: Plan) -> None:
    """Confine this (single-threaded) process; returns in PID 2 of the new PID namespace, confined.

    The process that called it and PID 1 stay behind as waiters and never return. Raises OSError when a
    step fails (in whichever process it fails).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    machine = platform.machine()
    if not confinement.userns:
        confinement = replace(confinement, uid=confinement.uid + os.getpid())
    # The root's folders must be traversable by the parser's uid whatever umask the service runs with
    # (the local stack's is 077). Nothing is written outside that tmpfs.
    os.umask(0o022)
    flags = _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWUTS | _CLONE_NEWNET
    outer_uid, outer_gid = os.getuid(), os.getgid()
    if confinement.userns:
        _check(libc.unshare(flags | _CLONE_NEWUSER), "unshare the user namespace")
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{confinement.uid} {outer_uid} 1")
        Path("/proc/self/gid_map").write_text(f"{confinement.gid} {outer_gid} 1")
    else:
        _check(libc.unshare(flags), "unshare the namespaces")
    # Opened (and symlinks read) before anything is mounted over them: the root's tmpfs goes on /tmp,
    # where a checkout or a virtual environment may sit.
    try:
        sources: dict[str, int | str] = {
            path: os.readlink(path) if os.path.islink(path) else os.open(path, os.O_PATH | os.O_CLOEXEC)
            for path in (*confinement.binds, *_DEVICES)
        }
    except OSError as exc:
        raise OSError(exc.errno, f"open the parser's runtime: {exc.strerror}") from exc
    filter_ = syscalls.build()
    last_cap = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    pid = os.fork()
    if pid != 0:
        with contextlib.suppress(OSError):
            _drop_privileges(libc, confinement, last_cap, machine)
            libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _wait_for(pid)
    _check(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "set the parent-death signal")
    _build_root(libc, sources, machine)
    for source in sources.values():
        if isinstance(source, int):
            os.close(source)
    with contextlib.suppress(OSError):
        libc.sethostname(b"parser", 6)
    _drop_privileges(libc, confinement, last_cap, machine)
    # A change of uid clears the parent-death signal, and a fork does not pass it on: set it in both.
    _check(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "set the parent-death signal")
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")
    pid = os.fork()
    if pid != 0:
        # The parser sees this process (its PID 1): not dumpable, it cannot be written through
        # /proc/1/mem, and under the same filter it could do nothing more than the parser if it were.
        try:
            _check(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "make PID 1 not dumpable")
            filter_.load()
        except OSError:
            os.kill(pid, signal.SIGKILL)
            os._exit(1)
        _wait_for(pid)
    _check(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "set the parent-death signal")
    filter_.load()


def _wait_for(pid: int) -> None:
    """A waiter: hold nothing the parser writes to, wait for it, and end as it ended.

    A PID 1 cannot die of its own signal: it exits with 128 + the signal, which the outer waiter turns
    back into that signal.
    """
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
    elif os.WIFEXITED(status) and os.WEXITSTATUS(status) > 128:
        sig = os.WEXITSTATUS(status) - 128
    else:
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


def _build_root(libc: Any, sources: dict[str, int | str], machine: str) -> None:
    _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE, "make the mounts private")
    new_root = "/tmp"
    _mount(libc, "tmpfs", new_root, "tmpfs", _MS_NOSUID | _MS_NODEV, "mount the parser's root", b"mode=0755")
    for path, fd in sources.items():
        target = new_root + path
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(fd, str):
            os.symlink(fd, target)
            continue
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.mkdir(target)
        else:
            Path(target).touch()
        _mount(libc, f"/proc/self/fd/{fd}", target, None, _MS_BIND, f"bind {path}")
        # Read-only, no set-uid, no devices but the four device nodes; flags the kernel locked stay set.
        keep = _locked_flags(target)
        extra = 0 if path in _DEVICES else _MS_RDONLY | _MS_NODEV
        _mount(libc, None, target, None, _MS_REMOUNT | _MS_BIND | _MS_NOSUID | extra | keep, f"seal {path}")
    os.mkdir(new_root + "/proc")
    _mount(libc, "proc", new_root + "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mount /proc")
    os.chdir(new_root)
    _check(libc.syscall(_PIVOT_ROOT[machine], b".", b"."), "pivot_root")
    _check(libc.umount2(b".", _MNT_DETACH), "detach the old root")
    os.chdir("/")
    _mount(libc, None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, "seal the root")


def _locked_flags(path: str) -> int:
    st = os.statvfs(path)
    flags = 0
    for st_flag, ms_flag in ((8, _MS_NOEXEC), (1024, _MS_NOATIME), (2048, _MS_NODIRATIME), (4096, _MS_RELATIME)):
        if st.f_flag & st_flag:
            flags |= ms_flag
    if st.f_flag & os.ST_NODEV:
        flags |= _MS_NODEV
    return flags


def _drop_privileges(libc: Any, confinement: Plan, last_cap: int, machine: str) -> None:
    for cap in range(last_cap + 1):
        _check(libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), "drop the bounding set")
    if not confinement.userns:
        os.setgroups([])
        os.setresgid(confinement.gid, confinement.gid, confinement.gid)
        # Leaving uid 0 empties the effective and permitted sets (no SECBIT_KEEP_CAPS).
        os.setresuid(confinement.uid, confinement.uid, confinement.uid)
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc.syscall(_CAPSET[machine], header, data), "clear the capabilities")
    _check(libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear the ambient set")


def _mount(
    libc: Any, source: str | None, target: str, fstype: str | None, flags: int, what: str, data: bytes | None = None
) -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    _check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), data), what)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
