"""The local stack's log files with real writer processes: several processes append to one file while the
supervisor's rotation renames it (no line lost, cut or doubled, and every writer moves to the new file), and
a server that keeps its descriptor survives the copy-and-cut."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from devstack.logfiles import CHECK_SECONDS, LogRotation
from tests.support.api import probe
from tests.support.stack import ROOT

# A gateway worker as the stack starts it: its output on the O_APPEND file, its lines through the handler.
WRITER = """
import logging, sys, time
from pathlib import Path
from shared.observe import configure_logging
path, name, stop = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
configure_logging("gateway", "INFO", process=name, log_file=path)
log = logging.getLogger("dossier.test")
i = 0
while not stop.exists():
    log.info("%s line %d %s", name, i, "x" * 100)
    i += 1
    if i % 100 == 0:
        time.sleep(0.001)
log.info("%s wrote %d", name, i)
"""

# A server that writes plain lines to the descriptor it was given and never reopens anything.
PLAIN_WRITER = """
import sys, time
from pathlib import Path
stop = Path(sys.argv[1])
i = 0
while not stop.exists():
    sys.stdout.write(f"[{i}] plain line {i} " + "y" * 80 + "\\n")
    i += 1
    if i % 100 == 0:
        time.sleep(0.001)
"""


@contextmanager
def writers(script: str, log: Path, *args: list[str]) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = []
    try:
        for argv in args:
            with open(log, "ab") as out:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-u", "-c", script, *argv], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
                    )
                )
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


def rotate_times(rotation: LogRotation, path: Path, times: int) -> None:
    now = [0.0]

    def rotated() -> bool:
        now[0] += CHECK_SECONDS
        return bool(rotation.check(now[0]) == [path] and rotated_files(path) >= times)

    probe(rotated, timeout=60, interval=0.02)


def rotated_files(path: Path) -> int:
    return len(list(path.parent.glob(f"{path.name}.*")))


def test_writers_of_one_file_follow_its_rotation_and_lose_no_line(tmp_path: Path) -> None:
    log, stop = tmp_path / "gateway.log", tmp_path / "stop"
    rotation = LogRotation(tmp_path, {"DOSSIER_LOG_MAX_BYTES": "65536", "DOSSIER_LOG_BACKUPS": "20"}, {log.name})
    names = ("gateway", "gateway-w2")
    with writers(WRITER, log, *([str(log), name, str(stop)] for name in names)) as procs:
        rotate_times(rotation, log, 6)

        # After the last rotation both writers move to the file of that name.
        def both_moved() -> bool:
            text = log.read_text()
            return all(f'"process":"{name}"' in text for name in names)

        probe(both_moved, timeout=30)
        stop.touch()
        for proc in procs:
            assert proc.wait(30) == 0
    assert 6 <= rotated_files(log) <= 20
    lines = [
        json.loads(raw)
        for path in (log, *tmp_path.glob("gateway.log.*"))
        for raw in path.read_bytes().decode().split("\n")
        if raw
    ]
    for name in names:
        mine = [line["msg"] for line in lines if line["process"] == name]
        total = int(next(msg for msg in mine if " wrote " in msg).rpartition(" ")[2])
        written = sorted(int(msg.split(" ")[2]) for msg in mine if " line " in msg)
        assert written == list(range(total)), name


def test_a_server_that_keeps_its_descriptor_writes_on_at_the_top_of_the_cut_file(tmp_path: Path) -> None:
    log, stop = tmp_path / "nats.log", tmp_path / "stop"
    rotation = LogRotation(tmp_path, {"DOSSIER_LOG_MAX_BYTES": "65536", "DOSSIER_LOG_BACKUPS": "3"}, {"gateway.log"})
    with writers(PLAIN_WRITER, log, [str(stop)]) as (proc,):
        rotate_times(rotation, log, 3)
        before = log.stat().st_size
        probe(lambda: log.stat().st_size > before, timeout=30)
        stop.touch()
        assert proc.wait(30) == 0
    assert rotated_files(log) == 3
    whole = re.compile(r"\[(\d+)\] plain line \1 y{80}")
    for path in (log, *tmp_path.glob("nats.log.*")):
        data = path.read_bytes()
        # O_APPEND writes land at the new end: the cut file has no hole of zeros where the old end was.
        assert b"\0" not in data and data.endswith(b"\n")
        assert all(whole.fullmatch(raw) for raw in data.decode().split("\n")[:-1]), path
