"""devstack.logfiles: the rotation settings, and the shifting of backups with the oldest dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack import logfiles
from devstack.logfiles import CHECK_SECONDS, LINE_END_TRIES, LINE_END_WAIT, LogRotation, backup, log_limits, rotate


def test_the_limits_have_defaults_and_refuse_what_is_not_a_size() -> None:
    assert log_limits({}) == (10 * 1024 * 1024, 5)
    assert log_limits({"DOSSIER_LOG_MAX_BYTES": "65536", "DOSSIER_LOG_BACKUPS": "2"}) == (65536, 2)
    for env in ({"DOSSIER_LOG_MAX_BYTES": "10MB"}, {"DOSSIER_LOG_MAX_BYTES": "100"}, {"DOSSIER_LOG_BACKUPS": "0"}):
        with pytest.raises(SystemExit, match=next(iter(env))):
            log_limits(env)


@pytest.mark.parametrize("renamed", [True, False])
def test_a_full_file_becomes_the_first_backup_and_only_the_newest_backups_are_kept(
    tmp_path: Path, renamed: bool
) -> None:
    rotation = LogRotation(tmp_path, {"DOSSIER_LOG_MAX_BYTES": "4096", "DOSSIER_LOG_BACKUPS": "2"}, {"gateway.log"})
    name = "gateway.log" if renamed else "nats.log"
    path = tmp_path / name
    small = tmp_path / "workspace.log"
    small.write_text("short\n")
    now = 0.0
    for generation in range(5):
        path.write_text(f"{generation}\n" * 4096)
        now += CHECK_SECONDS
        assert rotation.check(now) == [path]
        # Checked again within the interval: nothing is looked at.
        path.write_text(f"{generation}\n" * 4096)
        assert rotation.check(now) == []
        path.write_text("")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, f"{name}.1", f"{name}.2", "workspace.log"])
    newest, older = ((tmp_path / f"{name}.{n}").read_text() for n in (1, 2))
    assert newest.startswith("4\n") and older.startswith("3\n")
    assert path.read_text() == "" and small.read_text() == "short\n"


def waits_writing(monkeypatch: pytest.MonkeyPatch, path: Path, at: int, data: bytes) -> list[float]:
    """The copy's waits, recorded; during wait number `at` the server's write of `data` ends."""
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == at:
            with path.open("ab") as out:
                out.write(data)

    monkeypatch.setattr(logfiles.time, "sleep", wait)
    return waits


def test_a_copy_that_finds_a_line_half_written_waits_for_its_end_before_the_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "nats.log"
    path.write_bytes(b"[1] whole\n[2] half")
    # A read may see a write in progress (its first page only): the rest ends during the second wait.
    waits = waits_writing(monkeypatch, path, 2, b" written\n")
    rotate(path, 2, renamed=False)
    assert backup(path, 1).read_bytes() == b"[1] whole\n[2] half written\n"
    assert path.read_bytes() == b""
    assert waits == [LINE_END_WAIT, LINE_END_WAIT]


def test_a_line_that_never_ends_is_cut_after_a_bounded_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "nats.log"
    path.write_bytes(b"[1] whole\n[2] no end")
    waits: list[float] = []
    monkeypatch.setattr(logfiles.time, "sleep", waits.append)
    rotate(path, 2, renamed=False)
    assert backup(path, 1).read_bytes() == b"[1] whole\n[2] no end"
    assert path.read_bytes() == b""
    assert waits == [LINE_END_WAIT] * LINE_END_TRIES


def test_what_comes_during_the_last_wait_is_copied_not_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "nats.log"
    path.write_bytes(b"[1] whole\n[2] slow")
    waits_writing(monkeypatch, path, LINE_END_TRIES, b" and slower")
    rotate(path, 2, renamed=False)
    assert backup(path, 1).read_bytes() == b"[1] whole\n[2] slow and slower"
    assert path.read_bytes() == b""
