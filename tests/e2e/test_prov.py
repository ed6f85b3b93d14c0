"""`GET /v1/runs/{id}/prov`: the running example's lineage as W3C PROV-JSON, valid against the published schema."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest

from tests.support.api import Api
from tests.support.cli import dossier
from tests.support.documents import ANNOUNCEMENT, QUESTION, pdf
from tests.support.stack import RunningStack

SCHEMA = json.loads((Path(__file__).parents[1] / "support" / "prov-json.schema.json").read_text())


@pytest.fixture
def api(stack: RunningStack) -> Api:
    return Api(stack)


def test_prov_of_the_running_example_validates_and_names_a1(api: Api, stack: RunningStack) -> None:
    ws = api.workspace()
    a1 = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    api.revise(a1["id"], "Fund X liquidity is now weaker; redemptions may take 90 days.", 1)
    b1 = api.publish("Report B: Fund X disagrees", "Report B finds Fund X redemption liquidity inadequate.", ws["id"])
    api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])
    history = [{"publication_id": a1["id"], "version": 1}, {"publication_id": b1["id"], "version": 1}]
    run = api.wait_run(api.start_run(ws["id"], QUESTION, history=history)["id"])
    assert run["status"] == "completed", run["error"]

    doc = api.ok("GET", f"/v1/runs/{run['id']}/prov")
    jsonschema.Draft4Validator.check_schema(SCHEMA)
    jsonschema.Draft4Validator(SCHEMA).validate(doc)
    with pytest.raises(jsonschema.ValidationError):  # the schema is not vacuous: a usage needs its activity
        jsonschema.Draft4Validator(SCHEMA).validate({"used": {"_:u": {"prov:entity": "dossier:x"}}})

    activity = f"dossier:run/{run['id']}"
    record = doc["activity"][activity]
    assert datetime.fromisoformat(record["prov:startTime"]) <= datetime.fromisoformat(record["prov:endTime"])
    used = {u["prov:entity"]: u for u in doc["used"].values() if u["prov:activity"] == activity}
    # PROV-CONSTRAINTS: every usage of the run falls within the run (its start, its end).
    start, end = (datetime.fromisoformat(record[k]) for k in ("prov:startTime", "prov:endTime"))
    times = [datetime.fromisoformat(u["prov:time"]) for u in used.values() if "prov:time" in u]
    assert times and all(start <= t <= end for t in times), (start, end, sorted(times))
    a_at_1, a_at_2 = f"dossier:publication/{a1['id']}@1", f"dossier:publication/{a1['id']}@2"
    assert a_at_1 in used and used[a_at_1]["dossier:included"] is True
    assert a_at_2 not in used and a_at_2 not in doc["entity"]
    assert f"dossier:publication/{b1['id']}@1" in used
    assert "dossier:source/announcement@1" in used
    assert all(loc.startswith("page:") for loc in used["dossier:source/announcement@1"]["dossier:locator"])
    assert f"dossier:workspace/{ws['id']}/goal@1" in used
    history_id = f"dossier:run/{run['id']}/history"
    members = [m["prov:entity"] for m in doc["hadMember"].values() if m["prov:collection"] == history_id]
    assert members == [[a_at_1, f"dossier:publication/{b1['id']}@1"]] and history_id in used

    generated = f"dossier:publication/{run['publication']['id']}@{run['publication']['version']}"
    assert [g["prov:entity"] for g in doc["wasGeneratedBy"].values() if g["prov:activity"] == activity] == [generated]
    derived = {d["prov:usedEntity"] for d in doc["wasDerivedFrom"].values() if d["prov:generatedEntity"] == generated}
    assert a_at_1 in derived and a_at_2 not in derived

    agents = {a["prov:agent"] for a in doc["wasAssociatedWith"].values() if a["prov:activity"] == activity}
    assert agents == {f"dossier:model/{run['model']}", f"dossier:principal/{api.scope}/tester"}
    assert {doc["agent"][a]["prov:type"]["$"] for a in agents} == {"prov:SoftwareAgent", "prov:Person"}

    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    printed = dossier(stack, token, "run", "prov", run["id"])
    assert printed.returncode == 0 and json.loads(printed.stdout) == doc

    missing = api.http.get("/v1/runs/run_missing/prov")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_prov_names_the_outside_agent_and_each_lease_epoch(api: Api) -> None:
    ws = api.workspace()
    a1 = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    agent = {"name": "Claude Code", "model": "claude-opus"}
    history = [{"publication_id": a1["id"], "version": 1}]
    run = api.start_run(ws["id"], QUESTION, history=history, driver="external", agent=agent)
    assert run["agent"] == agent and api.ok("GET", f"/v1/runs/{run['id']}")["agent"] == agent
    policy_run = {"question": QUESTION, "request_id": uuid.uuid4().hex, "agent": agent}
    refused = api.http.post(f"/v1/workspaces/{ws['id']}/runs", json=policy_run)
    assert refused.status_code == 422 and refused.json()["error"]["details"]["field"] == "agent"

    # A second session takes the run over (epoch 2), reads and finishes.
    taken = api.ok("POST", f"/v1/runs/{run['id']}/lease/take", json={"force": True})
    lease = {"X-Run-Lease": taken["lease"]["token"]}
    ref = {"kind": "publication", "id": a1["id"], "version": 1}
    assert api.http.post(f"/v1/runs/{run['id']}/read", json={"ref": ref}, headers=lease).status_code == 200
    answer = f"- Fund X can meet redemptions within 30 days ({a1['id']}@v1)."
    finish = api.http.post(f"/v1/runs/{run['id']}/finish", json={"answer": answer}, headers=lease)
    assert finish.status_code == 200, finish.text

    doc = api.ok("GET", f"/v1/runs/{run['id']}/prov")
    jsonschema.Draft4Validator(SCHEMA).validate(doc)
    activity = f"dossier:run/{run['id']}"
    named = "dossier:agent/Claude%20Code"
    assert doc["agent"][named]["prov:label"] == "Claude Code" and doc["agent"][named]["dossier:model"] == "claude-opus"
    assert "dossier:model/external" not in doc["agent"]
    epochs = [
        assoc
        for assoc in doc["wasAssociatedWith"].values()
        if assoc["prov:activity"] == activity and assoc["prov:agent"] == named
    ]
    assert sorted(e["dossier:epoch"] for e in epochs) == [1, 2]
    began = {e["dossier:epoch"]: datetime.fromisoformat(e["dossier:leaseFrom"]["$"]) for e in epochs}
    assert began[1] <= began[2]
    [delegation] = doc["actedOnBehalfOf"].values()
    assert delegation["prov:delegate"] == named
    assert delegation["prov:responsible"] == f"dossier:principal/{api.scope}/tester"
