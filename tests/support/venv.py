"""A fresh virtual environment with packages installed by its own pip, as a user installs them."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

from tests.support.stack import ROOT

# Cold, the extras download a few dozen wheels from the package index; pip caches them for the next time.
INSTALL_SECONDS = 900
# In the folder setuptools builds in, which git ignores (.gitignore: build/).
BUILD_LOCK = ROOT / "clients" / "python" / "build" / "install.lock"


def fresh_venv(where: Path, *requirements: str) -> Path:
    """`python -m venv WHERE` and `pip install REQUIREMENTS` run in the repository's folder (so
    `./clients/python` is a path as the docs write it); the new environment's python."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # pip builds a local folder in place (setuptools writes build/ and the egg-info beside the sources), and
    # make test's sessions run side by side: one install at a time from this tree.
    BUILD_LOCK.parent.mkdir(exist_ok=True)
    with open(BUILD_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_SECONDS,
        )
    assert done.returncode == 0, f"pip install {' '.join(requirements)}:\n{done.stdout[-2000:]}{done.stderr[-4000:]}"
    return python


def run_script(python: Path, script: Path, *args: str, env: dict[str, str], timeout: float) -> str:
    """Run one script of tests/e2e/client_venv with the environment's python, outside the repository's
    folder (nothing of the server is importable there); what it printed on stdout."""
    clean = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(python), str(script), *args], cwd=script.parent, env=clean, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{script.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return done.stdout
