"""An import's file checks are made on the descriptor, not the path: a path swapped between resolution and
open is refused, and the copy is bounded in bytes and time (services.assets.acquisition)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from services.assets.acquisition import copy_bounded, open_regular, resolve_import, stage_import
from shared.errors import Invalid, Timeout, TooLarge


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root" / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("outside the root")
    return (tmp_path / "root").resolve()


def swapped(root: Path, relative: str, swap: Callable[[Path], None]) -> Invalid:
    """Resolve a regular file, swap the path, then open what was resolved: the refusal (never a hang)."""
    (root / relative).write_text("a regular file when it was resolved")
    real_base, candidate = resolve_import(root, "docs", relative)
    swap(candidate)
    with ThreadPoolExecutor(1) as pool:
        # A blocking open would hang here; the result must come at once.
        future = pool.submit(open_regular, real_base, candidate)
        try:
            with pytest.raises(Invalid) as err:
                future.result(timeout=5)
        finally:
            if not future.done():  # the open blocked on a FIFO: be its writer so the thread ends
                os.close(os.open(candidate, os.O_RDWR))
    return err.value


def test_a_file_swapped_for_a_fifo_is_refused_without_blocking(root: Path) -> None:
    def to_fifo(path: Path) -> None:
        path.unlink()
        os.mkfifo(path)

    assert swapped(root, "a.pdf", to_fifo).details == {"field": "path", "type": "a FIFO (named pipe)"}


def test_a_file_swapped_for_a_link_to_a_device_is_refused(root: Path) -> None:
    def to_link(path: Path) -> None:
        path.unlink()
        os.symlink("/dev/zero", path)

    # O_PATH | O_NOFOLLOW holds the link itself, never what it points to.
    assert swapped(root, "a.pdf", to_link).details == {"field": "path", "type": "a symbolic link"}


def test_a_directory_swapped_for_a_link_out_of_the_root_is_refused(root: Path) -> None:
    def to_escape(path: Path) -> None:
        folder = path.parent
        (folder / "secret.txt").unlink()
        folder.rmdir()
        os.symlink(root.parent / "outside", folder)

    assert swapped(root, "sub/secret.txt", to_escape).message == "the path leaves the approved root"


def test_a_file_swapped_for_a_directory_is_refused(root: Path) -> None:
    def to_directory(path: Path) -> None:
        path.unlink()
        path.mkdir()

    assert swapped(root, "a.pdf", to_directory).details["type"] == "a directory"


def test_the_copy_counts_bytes_and_time_itself(root: Path, tmp_path: Path) -> None:
    """Not the size the file had when it was opened: a file that grows while it is read (here, one whose
    size check has passed) stops at the limit; and a read past its deadline stops between chunks."""
    (root / "big.txt").write_bytes(b"z" * 3_000_000)
    fd = open_regular(root, root / "big.txt")
    out = os.open(tmp_path / "copy", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(TooLarge):
            copy_bounded(fd, out, max_bytes=2_000_000, deadline=time.monotonic() + 30)
        os.lseek(fd, 0, os.SEEK_SET)
        with pytest.raises(Timeout):
            copy_bounded(fd, out, max_bytes=10_000_000, deadline=time.monotonic() - 1)
    finally:
        os.close(fd)
        os.close(out)
    staged = stage_import(root, "docs", "big.txt", max_bytes=10_000_000, deadline=time.monotonic() + 30)
    try:
        assert (staged.size, staged.name) == (3_000_000, "big.txt")
    finally:
        staged.discard()
