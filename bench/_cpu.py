"""Where the CPU goes: processor time per process of a stack over a measured stretch.

A stack's processes (services, PostgreSQL, NATS, the S3 server, each gateway worker) are named by its pid
files. Each name gets a control group of its own (cgroup v1 `cpuacct` or v2 `cpu.stat`), and its process
with every descendant is moved into it; what they start later is born inside. The group's counter then
holds all the processor time of that name, also of processes that ended meanwhile: a parser in its own
PID namespace, a PostgreSQL backend that closed. Where no group can be made (not root, no cgroup
filesystem), the process trees in /proc are summed instead, and the output says that processes which
ended are missing from it. Where the cpu controller shares cgroup v1's hierarchy with cpuacct (mounted as
`cpu,cpuacct`), the kernel schedules each group as one entity while it is measured; the machines this was
measured on mount them apart.

On a machine with N cores a stretch of work cannot take less wall time than its processor time ÷ N, so
these figures bound what any change in scheduling alone can gain.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

TICK = 1 / os.sysconf("SC_CLK_TCK")
# The workers of one service (gateway, gateway-w2, ...) are counted together.
_WORKER = re.compile(r"-w\d+$")
_V1 = Path("/sys/fs/cgroup/cpuacct")
_V2 = Path("/sys/fs/cgroup")


def _stats() -> dict[int, tuple[int, float]]:
    """(parent pid, own + reaped children's processor seconds) of every live process."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        found[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) * TICK)
    return found


def _trees(roots: Mapping[str, int], stats: dict[int, tuple[int, float]]) -> dict[str, list[int]]:
    """Each name's process and its live descendants."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    trees: dict[str, list[int]] = {}
    for name, root in roots.items():
        pids, todo = [], [root]
        while todo:
            pid = todo.pop()
            if pid in stats:
                pids.append(pid)
                todo.extend(children.get(pid, ()))
        trees.setdefault(_WORKER.sub("", name), []).extend(pids)
    return trees


def stack_pids(home: Path) -> dict[str, int]:
    """The stack's processes by name, from its pid files."""
    return {p.stem: int(p.read_text()) for p in sorted((home / "pids").glob("*.pid"))}


def _own_group() -> tuple[Path, bool] | None:
    """The control group folder this process is in, and whether it is cgroup v1's cpuacct; None if none."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(",") and _V1.is_dir():
            return _V1 / path.lstrip("/"), True
        if controllers == "" and (_V2 / "cgroup.controllers").exists():
            return _V2 / path.lstrip("/"), False
    return None


class CpuMeter:
    """Processor seconds per named process (with its descendants) between `start()` and `stop()`.

    Use it as a context manager: leaving moves the processes back where they were and removes the groups.
    """

    def __init__(self, pids: Mapping[str, int]):
        self._pids = dict(pids)
        self._before: dict[str, float] = {}
        self._groups: dict[str, Path] = {}
        self._home: Path | None = None
        self._v1 = False
        self.exact = self._make_groups()

    def _make_groups(self) -> bool:
        own = _own_group()
        if own is None:
            return False
        parent, self._v1 = own
        home = parent / f"dossier-bench-{os.getpid()}-{id(self):x}"
        try:
            home.mkdir()
            self._home = home
            for name, pids in _trees(self._pids, _stats()).items():
                group = home / name
                group.mkdir()
                self._groups[name] = group
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        (group / "cgroup.procs").write_text(str(pid))
        except OSError:
            self.close()
            return False
        return True

    def _read(self) -> dict[str, float]:
        if not self.exact:
            stats = _stats()
            return {name: sum(stats[p][1] for p in pids) for name, pids in _trees(self._pids, stats).items()}
        seconds = {}
        for name, group in self._groups.items():
            if self._v1:
                seconds[name] = int((group / "cpuacct.usage").read_text()) / 1e9
            else:
                usage = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
                seconds[name] = int(usage["usage_usec"]) / 1e6
        return seconds

    def start(self) -> None:
        self._before = self._read()

    def stop(self) -> dict[str, float]:
        after = self._read()
        return {name: after[name] - self._before.get(name, 0.0) for name in after}

    def close(self) -> None:
        """Every process still in a group goes back to this process's own group; the groups are removed."""
        if self._home is None:
            return
        back = self._home.parent / "cgroup.procs"
        for group in self._groups.values():
            # A process may start inside while the others leave: a few rounds empty the group.
            for _ in range(5):
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        back.write_text(pid)
                with contextlib.suppress(OSError):
                    group.rmdir()
                    break
        with contextlib.suppress(OSError):
            self._home.rmdir()
        self._home = None
        self._groups.clear()

    def __enter__(self) -> CpuMeter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def print_split(
    spent: Mapping[str, float], *, per: float, unit: str, scale: float, wall: float, exact: bool = True
) -> None:
    """The processor time of each process (largest first) per unit of work, and the bound it sets."""
    cores = os.cpu_count() or 1
    total = sum(spent.values())
    shown = sorted(((s, n) for n, s in spent.items() if s * scale / per >= 0.5), reverse=True)
    how = "control groups" if exact else "/proc, without the processes that ended"
    print(f"  processor time per {unit}, by process ({how}; {cores} cores):")
    for seconds, name in shown:
        print(f"    {name:<12} {seconds * scale / per:8.1f}")
    print(
        f"    {'all':<12} {total * scale / per:8.1f}   (busy {total / (wall * cores):.0%} of {cores} cores, so at most"
        f" {cores * per / total:,.1f} per second however it is scheduled)"
    )
