"""GET /v1/publications/{id}/diff: a line diff of two versions, read under the rules of a version read."""

from __future__ import annotations

import json

from tests.support.api import Api
from tests.support.cli import dossier, no_traceback
from tests.support.stack import RunningStack


def test_diff_of_two_versions(stack: RunningStack) -> None:
    api = Api(stack)
    pub = api.publish("Report A", "Fund X can meet redemptions.\nLiquidity is adequate.")
    api.revise(pub["id"], "Fund X can meet redemptions.\nLiquidity is weaker.\nGates apply.", 1)
    diff = api.ok("GET", f"/v1/publications/{pub['id']}/diff?from=1&to=2")
    assert (diff["from"], diff["to"], diff["truncated"]) == (1, 2, False)
    lines = [(line["op"], line["text"]) for hunk in diff["hunks"] for line in hunk["lines"]]
    assert lines == [
        ("context", "Fund X can meet redemptions."),
        ("removed", "Liquidity is adequate."),
        ("added", "Liquidity is weaker."),
        ("added", "Gates apply."),
    ]
    same = api.ok("GET", f"/v1/publications/{pub['id']}/diff?from=2&to=2")
    assert same["hunks"] == []


def test_diff_refuses_withdrawn_missing_and_foreign_versions(stack: RunningStack) -> None:
    api, other = Api(stack), Api(stack)
    pub = api.publish("Report A", "v1 body")
    api.revise(pub["id"], "v2 body", 1)
    path = f"/v1/publications/{pub['id']}/diff"
    assert api.http.get(f"{path}?from=1&to=3").json()["error"]["code"] == "not_found"
    assert api.http.get(f"{path}?from=0&to=1").status_code == 422
    assert api.http.get(f"{path}?to=1").json()["error"]["details"]["field"] == "from"
    foreign = other.http.get(f"{path}?from=1&to=2")
    assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "not_found"
    api.ok("POST", f"/v1/publications/{pub['id']}/versions/1/withdraw", json={"reason": "wrong"})
    withdrawn = api.http.get(f"{path}?from=1&to=2")
    assert withdrawn.status_code == 409
    assert withdrawn.json()["error"]["code"] == "unavailable"
    assert withdrawn.json()["error"]["details"]["reason"] == "withdrawn"


def test_the_cli_prints_the_diff_and_its_json(stack: RunningStack) -> None:
    api = Api(stack)
    pub = api.publish("Report A", "Fund X can meet redemptions.\nLiquidity is adequate.")
    api.revise(pub["id"], "Fund X can meet redemptions.\nLiquidity is weaker.", 1)
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    shown = dossier(stack, token, "publication", "diff", pub["id"], "1", "2")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-3:] == [
        " Fund X can meet redemptions.",
        "-Liquidity is adequate.",
        "+Liquidity is weaker.",
    ]
    as_json = dossier(stack, token, "publication", "diff", pub["id"], "1", "2", "--json")
    assert json.loads(as_json.stdout)["hunks"][0]["lines"][1]["op"] == "removed"
    missing = dossier(stack, token, "publication", "diff", pub["id"], "1", "9")
    assert missing.returncode == 1 and no_traceback(missing) and "not_found" in missing.stderr
