"""Files through the CLI: artifacts (upload, show, download, pin), imports from an approved root, retiring a source."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from tests.support.cli import dossier, no_traceback
from tests.support.stack import RunningStack


def test_artifacts_imports_and_sources(stack: RunningStack, tmp_path: Path) -> None:
    token = stack.token(f"f{uuid.uuid4().hex[:8]}")

    def run(*args: str) -> Any:
        done = dossier(stack, token, *args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    ws = run("workspace", "create", "--title", "Files", "--goal", "Keep the reports")
    html = b"<html><body><h1>Report</h1></body></html>"
    (tmp_path / "report.html").write_bytes(html)
    artifact = run("artifact", "upload", str(tmp_path / "report.html"), "--title", "Report")
    assert artifact["size"] == len(html) and run("artifact", "show", artifact["id"]) == artifact
    to_stdout = dossier(stack, token, "artifact", "download", artifact["id"])
    assert to_stdout.returncode == 0 and to_stdout.stdout.encode() == html
    saved = run("artifact", "download", artifact["id"], "--output", str(tmp_path / "copy.html"))
    assert saved["size"] == len(html) and (tmp_path / "copy.html").read_bytes() == html
    pinned = run("workspace", "pin-artifact", ws["id"], artifact["id"])
    assert pinned["retention"] == "retained" and pinned["association"] == "confirmed"
    missing = dossier(stack, token, "artifact", "upload", str(tmp_path / "nope.html"), "--title", "x")
    assert missing.returncode == 2 and no_traceback(missing) and "cannot read" in missing.stderr

    (stack.approved_roots["docs"] / "minutes.txt").write_text("Board minutes: the gate was discussed.\n")
    imported = run("import", "docs", "minutes.txt", "--source-id", f"minutes-{uuid.uuid4().hex[:6]}")
    assert imported["status"] == "active" and imported["version"] == 1
    escape = dossier(stack, token, "import", "docs", "../../etc/passwd", "--source-id", "passwd")
    assert escape.returncode == 1 and escape.stderr.startswith("dossier: invalid:")

    associated = run("workspace", "add-source", ws["id"], imported["source_id"])
    assert associated["workspace_id"] == ws["id"]
    retired = run("source", "retire", imported["source_id"])
    assert [v["status"] for v in retired["versions"]] == ["retired"] and retired["active_version"] is None
