"""A run's lineage in W3C PROV-JSON, built only from what runhost itself recorded.

The run is the activity; every material it read (ledger `read` / `included` rows) is an entity at its exact
version that the run `used`; the goal version it was admitted with and the user's history selection are
entities too; its publication version `wasGeneratedBy` the run and `wasDerivedFrom` each included material;
the principal who asked and the model that drove it are the agents. An outside agent that drove an external
run is named as its admission named it, and each lease epoch (the admission's, then one per take-over) is an
association of its own. Nothing here asks another service: the export says what the run consumed then, not
what those materials are now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote

from services.runhost.admitted import AdmittedRun
from shared.contracts.common import Ref
from shared.contracts.runhost import ProvDocument

NAMESPACE = "urn:dossier:"
# Evidence reads of one source can be many pages; the export keeps the first ones per entity.
MAX_LOCATORS = 100
CONSUMED = ("read", "included")


def qualified(value: str) -> dict[str, str]:
    return {"$": value, "type": "prov:QUALIFIED_NAME"}


def ref_id(ref: Ref) -> str:
    """`dossier:publication/pub_1@1`: PROV-N local names may hold `/` and `@`, so the ref reads as itself."""
    suffix = f"@{ref.version}" if ref.version is not None else ""
    return f"dossier:{ref.kind}/{ref.id}{suffix}"


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


class ProvBuilder:
    def __init__(self, run: AdmittedRun):
        self._run = run
        self.run_id = f"dossier:run/{run.id}"
        self.doc = ProvDocument(prefix={"dossier": NAMESPACE, "prov": "http://www.w3.org/ns/prov#"})
        self._blank = 0

    def _next(self, kind: str) -> str:
        self._blank += 1
        return f"_:{kind}{self._blank}"

    def activity(self) -> None:
        run = self._run
        record: dict[str, Any] = {
            "prov:type": qualified("dossier:Run"),
            "prov:label": str(run.question)[:500],
            "dossier:status": run.status,
            "dossier:workspace": run.workspace_id,
            "dossier:conversation": run.conversation_id,
        }
        start = self._began()
        if start is not None:
            record["prov:startTime"] = start
        end = _time(run.finished_at)
        if end is not None:
            record["prov:endTime"] = end
        self.doc.activity[self.run_id] = record

    def _began(self) -> str | None:
        return _time(self._run.started_at or self._run.created_at)

    def agents(self, epochs: Iterable[Mapping[str, Any]] = ()) -> None:
        run = self._run
        model_id = self._driver()
        associations = [{"prov:activity": self.run_id, "prov:agent": model_id, **_epoch(e)} for e in epochs]
        for association in associations or [{"prov:activity": self.run_id, "prov:agent": model_id}]:
            self.doc.wasAssociatedWith[self._next("assoc")] = association
        if run.principal is None:
            return
        person_id = f"dossier:principal/{run.scope}/{run.principal}"
        self.doc.agent[person_id] = {"prov:type": qualified("prov:Person"), "prov:label": run.principal}
        self.doc.wasAssociatedWith[self._next("assoc")] = {"prov:activity": self.run_id, "prov:agent": person_id}
        self.doc.actedOnBehalfOf[self._next("deleg")] = {
            "prov:delegate": model_id,
            "prov:responsible": person_id,
            "prov:activity": self.run_id,
        }

    def _driver(self) -> str:
        """The software agent that drove the run: the run host's model, or the outside agent as named."""
        run = self._run
        if run.agent is None:
            model_id = f"dossier:model/{run.model}"
            self.doc.agent[model_id] = {"prov:type": qualified("prov:SoftwareAgent"), "prov:label": run.model}
            return model_id
        # Any name becomes a local name PROV-N can hold: its other characters percent-encoded.
        agent_id = f"dossier:agent/{quote(run.agent.name, safe='')}"
        record: dict[str, Any] = {"prov:type": qualified("prov:SoftwareAgent"), "prov:label": run.agent.name}
        if run.agent.model is not None:
            record["dossier:model"] = run.agent.model
        self.doc.agent[agent_id] = record
        return agent_id

    def goal(self) -> None:
        run = self._run
        goal_id = f"dossier:workspace/{run.workspace_id}/goal@{run.goal_version}"
        self.doc.entity[goal_id] = {
            "prov:type": qualified("dossier:GoalVersion"),
            "prov:value": run.goal_text,
            "dossier:version": run.goal_version,
        }
        # Used when the activity began: a `used` time before the run's startTime breaks PROV-CONSTRAINTS.
        self._use(goal_id, self._began(), role="goal")

    def history(self) -> None:
        """The user's explicit selection: a collection of the publication versions the run was pointed at."""
        selected = [Ref(kind="publication", id=h.publication_id, version=h.version) for h in self._run.history]
        collection = f"dossier:run/{self._run.id}/history"
        self.doc.entity[collection] = {"prov:type": qualified("prov:Collection"), "prov:label": "history selection"}
        for ref in selected:
            self._entity(ref)
        if selected:
            self.doc.hadMember[self._next("member")] = {
                "prov:collection": collection,
                "prov:entity": [ref_id(r) for r in selected],
            }
        self._use(collection, self._began(), role="history")

    def consumed(self, ledger: Iterable[Mapping[str, Any]]) -> list[Ref]:
        """One `used` per material and version, with its locators and whether its text entered a model input."""
        uses: dict[str, dict[str, Any]] = {}
        included: list[Ref] = []
        for row in ledger:
            if row["stage"] not in CONSUMED:
                continue
            ref = Ref.model_validate(row["ref"])
            entity = self._entity(ref, row["content_hash"])
            use = uses.get(entity)
            if use is None:
                use = uses[entity] = {"prov:activity": self.run_id, "prov:entity": entity, "dossier:included": False}
                use["prov:time"] = _time(row["at"])
                use["prov:role"] = "read"
            if row["locator"] and len(use.setdefault("dossier:locator", [])) < MAX_LOCATORS:
                if row["locator"] not in use["dossier:locator"]:
                    use["dossier:locator"].append(row["locator"])
            if row["stage"] == "included" and not use["dossier:included"]:
                use["dossier:included"] = True
                included.append(ref)
        for use in uses.values():
            self.doc.used[self._next("use")] = use
        return included

    def publication(self, included: list[Ref]) -> None:
        run = self._run
        if run.publication_id is None:
            return
        pub = Ref(kind="publication", id=run.publication_id, version=run.publication_version)
        pub_id = self._entity(pub)
        generation: dict[str, Any] = {"prov:entity": pub_id, "prov:activity": self.run_id}
        if run.finished_at is not None:
            generation["prov:time"] = _time(run.finished_at)
        self.doc.wasGeneratedBy[self._next("gen")] = generation
        for ref in included:
            self.doc.wasDerivedFrom[self._next("deriv")] = {
                "prov:generatedEntity": pub_id,
                "prov:usedEntity": ref_id(ref),
                "prov:activity": self.run_id,
            }

    def _entity(self, ref: Ref, content_hash: str | None = None) -> str:
        entity = ref_id(ref)
        record = self.doc.entity.setdefault(
            entity,
            {"prov:type": qualified(f"dossier:{ref.kind.capitalize()}"), "prov:label": ref_id(ref).split("/", 1)[1]},
        )
        if ref.version is not None:
            record["dossier:version"] = ref.version
        if content_hash:
            record["dossier:contentHash"] = content_hash
        return entity

    def _use(self, entity: str, at: str | None, *, role: str) -> None:
        use: dict[str, Any] = {"prov:activity": self.run_id, "prov:entity": entity, "prov:role": role}
        if at is not None:
            use["prov:time"] = at
        self.doc.used[self._next("use")] = use


def _epoch(row: Mapping[str, Any]) -> dict[str, Any]:
    """A lease epoch's attributes on its association: which epoch, and when its session took the run."""
    return {
        "dossier:epoch": row["epoch"],
        "dossier:leaseFrom": {"$": _time(row["created_at"]), "type": "xsd:dateTime"},
    }


def run_prov(
    run: AdmittedRun, ledger: Iterable[Mapping[str, Any]], epochs: Iterable[Mapping[str, Any]] = ()
) -> ProvDocument:
    """`epochs`: an external run's lease epochs (epoch, created_at), each an association of its own."""
    builder = ProvBuilder(run)
    builder.activity()
    builder.agents(epochs)
    builder.goal()
    builder.history()
    builder.publication(builder.consumed(ledger))
    return builder.doc
