"""The parser's seccomp allow-list, loaded through libseccomp (libseccomp2, present on Debian and Ubuntu).

The list is what the parsers were measured to call (strace over PDF with and without OCR, DOCX, XLSX,
HTML and text; see docs/security.md) plus the interpreter's and the C runtime's usual needs. Everything
else fails with EPERM: no socket is created, no namespace is joined or made, no file system is mounted,
no process is started or traced, no program is executed, no file mode or owner is changed. Threads are
allowed (OpenVINO starts them for OCR, under the thread limit of services.assets.parser); new processes
are not (`clone` without CLONE_THREAD).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
from typing import Any

ALLOWED = (
    # files, through descriptors the parser already has or opens read-only in its own root
    "read", "readv", "pread64", "preadv", "write", "writev", "open", "openat", "close", "close_range", "lseek",
    "fstat", "stat", "lstat", "newfstatat", "statx", "fstatfs", "statfs", "access", "faccessat", "faccessat2",
    "readlink", "readlinkat", "getdents", "getdents64", "getcwd", "fcntl", "dup", "dup2", "dup3", "fadvise64",
    # memory
    "mmap", "munmap", "mprotect", "mremap", "brk", "madvise", "mbind", "get_mempolicy", "mincore", "membarrier",
    # signals, to itself (it is alone in its PID namespace)
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "kill", "tgkill", "tkill",
    # identity, limits, time and randomness
    "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
    "getgroups", "uname", "sysinfo", "getrandom", "prlimit64", "getrlimit", "getrusage", "times",
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    # threads and the C runtime
    "futex", "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "arch_prctl", "sched_getaffinity",
    "sched_setaffinity", "sched_yield", "exit", "exit_group", "restart_syscall", "wait4", "waitid",
    # waiting on its descriptors
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "poll", "ppoll", "select",
    "pselect6", "eventfd2",
    # the job's descriptor arrives over the stdin socket (nothing goes back on it); passages leave on stdout
    "recvmsg", "recvfrom", "getsockopt", "getsockname", "getpeername",
)  # fmt: skip

_CLONE_THREAD = 0x00010000
_PR_SET_NAME, _PR_GET_NAME = 15, 16
_TCGETS, _FIONREAD, _FIONBIO, _FIOCLEX = 0x5401, 0x541B, 0x5421, 0x5451
_ACT_ALLOW = 0x7FFF0000
_ACT_ERRNO = 0x00050000
_CMP_EQ, _CMP_MASKED_EQ = 4, 7


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]


class Unconfinable(Exception):
    """The confinement cannot be set up here; the message says why (shown in health and on the version)."""


def _library() -> Any:
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        # Elsewhere than the usual soname: ask the loader's cache (a subprocess, so only as a fallback).
        lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)
    ]  # fmt: skip
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def check_available() -> None:
    """Raises Unconfinable when libseccomp cannot be loaded."""
    try:
        _library()
    except OSError as exc:
        raise Unconfinable(f"libseccomp (libseccomp2) is not installed: {exc}") from exc


class Filter:
    def __init__(self) -> None:
        self._lib = _library()
        self._ctx = self._lib.seccomp_init(_ACT_ERRNO | errno.EPERM)
        if not self._ctx:
            raise OSError("seccomp_init failed")
        for name in ALLOWED:
            self._rule(_ACT_ALLOW, name)
        # Threads, never processes.
        self._rule(_ACT_ALLOW, "clone", (0, _CMP_MASKED_EQ, _CLONE_THREAD, _CLONE_THREAD))
        # clone3 carries its flags in memory a filter cannot read: ENOSYS makes the C library use clone.
        self._rule(_ACT_ERRNO | errno.ENOSYS, "clone3")
        for option in (_PR_SET_NAME, _PR_GET_NAME):
            self._rule(_ACT_ALLOW, "prctl", (0, _CMP_EQ, option, 0))
        for request in (_TCGETS, _FIONREAD, _FIONBIO, _FIOCLEX):
            self._rule(_ACT_ALLOW, "ioctl", (1, _CMP_EQ, request, 0))

    def _rule(self, action: int, name: str, *conditions: tuple[int, int, int, int]) -> None:
        number = self._lib.seccomp_syscall_resolve_name(name.encode())
        if number < 0:
            return  # not a system call of this architecture
        array = (_ArgCmp * max(1, len(conditions)))(*(_ArgCmp(*c) for c in conditions))
        result = self._lib.seccomp_rule_add_array(self._ctx, action, number, len(conditions), array)
        if result != 0:
            raise OSError(-result, f"seccomp rule for {name}: {result}")

    def load(self) -> None:
        result = self._lib.seccomp_load(self._ctx)
        self._lib.seccomp_release(self._ctx)
        if result != 0:
            raise OSError(-result, f"seccomp_load failed: {result}")


def build() -> Filter:
    return Filter()
