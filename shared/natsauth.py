"""Who may do what on the bus: one NATS user per service, with subject permissions, and how to connect.

Every connection authenticates (user and password, generated once and kept 0600 under $DOSSIER_HOME;
the server's config holds only their bcrypt hashes). The services live in the internal account; outside
subscribers in an account of their own (shared.outside). Each service user may
- subscribe only to its own request subjects (`dossier.<service>.>`), and only in its own queue group
  (named as the service), so a connection with its password takes its turn at answering requests but
  never watches the requests its service's replicas answer; and to its own reply inbox
  (`_INBOX_<service>.>`: connections use a per-user inbox prefix, so no one reads another's replies);
- publish requests only to the subjects it calls (and to its own, for its health check), its own events
  (`dossier.evt.<event prefix>.>`), and replies to requests it received (`allow_responses`);
- use only the JetStream API its publishing and its own durable consumers need. No service user may
  delete, purge or update a stream, or delete a consumer.

A request carries the user's actor in its envelope, with the caller's signed proof of it (shared/proof.py):
the receiving service trusts the actor only with a proof by a signer that `CALLS` names for the subject.
The permissions below are the first wall, who may publish to each subject: the user-facing subjects only the gateway (which checks
the token) may call; runhost may call the reads of a run (further bound by the signed run grant) and the
owners' subjects of a run's finishing steps; workspace only the owners' `check` subjects and
`artifact.retain`, and the reads a stale claim's re-check needs (a publication's claims and versions, a
source's passages) with the one write it makes (`publication.claims.mark_stale`). Publication, artifact
and assets can send no request to another service at all.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import bcrypt

from shared import outside
from shared.contracts.common import ALL_PROCESSES, EVENT_SUBJECT_PREFIX, STREAM_NAME, health_subject
from shared.contracts.registry import called_by, consumed_by
from shared.outside import EVENTS_USER, INTERNAL_ACCOUNT, MIRROR_ACCOUNT, OUTSIDE_ACCOUNT, OUTSIDE_ADMIN
from shared.secretfiles import secret_table
from shared.settings import CommonSettings
from shared.streams import DLQ_STREAM, DLQ_SUBJECT_PREFIX

# Tests that play a caller or another service's relay: broad, but never stream administration.
TESTER_USER = "tester"
JS_API = "$JS.API"
BCRYPT_ROUNDS = 6

# The event type prefix each service publishes under (`run.completed` is runhost's).
EVENT_PREFIX: dict[str, str] = {
    "workspace": "workspace",
    "runhost": "run",
    "publication": "publication",
    "artifact": "artifact",
    "assets": "asset",
}

# The request subjects each process calls on other services: those whose contract declaration names it
# among their callers (shared/contracts/registry.py), and for the gateway every service's health. A subject
# missing here is refused by the server with a permissions violation.
CALLS: dict[str, tuple[str, ...]] = {
    process: (*(health_subject(s) for s in EVENT_PREFIX if process == "gateway"), *called_by(process))
    for process in ALL_PROCESSES
}

# Event subjects each service follows with durable consumers: the event types whose contract declaration names
# it among their consumers (the service's runtime checks that each has a handler marked for it, shared/events.py).
CONSUMES: dict[str, tuple[str, ...]] = {
    process: tuple(event.subject for event in consumed_by(process)) for process in ALL_PROCESSES if consumed_by(process)
}


def inbox_prefix(user: str) -> str:
    return f"_INBOX_{user}"


def _stream_api() -> list[str]:
    # Every service declares the stream at start (publishing to a missing stream fails).
    return [f"{JS_API}.INFO", f"{JS_API}.STREAM.INFO.{STREAM_NAME}", f"{JS_API}.STREAM.CREATE.{STREAM_NAME}"]


def _consumer_api(durables: Iterable[str] | None, filters: Iterable[str]) -> list[str]:
    """Create (only with the service's own filter subjects), look up, pull from and ack its durables.

    NATS permissions match whole tokens, so a durable name is either exact or `*`; tests give every
    instance its own names and pass None (any name, still pinned to the service's filter subjects).
    """
    names = list(durables) if durables is not None else ["*"]
    allowed = [f"{JS_API}.CONSUMER.CREATE.{STREAM_NAME}.{n}.{f}" for n in names for f in filters]
    for name in names:
        allowed += [
            f"{JS_API}.CONSUMER.INFO.{STREAM_NAME}.{name}",
            f"{JS_API}.CONSUMER.MSG.NEXT.{STREAM_NAME}.{name}",
            f"$JS.ACK.{STREAM_NAME}.{name}.>",
            # An event given up on goes to the dead-letter stream under the consumer's own name.
            f"{DLQ_SUBJECT_PREFIX}.{name}.>",
        ]
    allowed += [f"{JS_API}.STREAM.INFO.{DLQ_STREAM}", f"{JS_API}.STREAM.CREATE.{DLQ_STREAM}"]
    return allowed


def service_permissions(service: str, durables: Iterable[str] | None = None) -> dict[str, Any]:
    own = f"dossier.{service}.>"
    publish = [own, *CALLS[service], *_stream_api()]
    if service in EVENT_PREFIX:
        publish.append(f"{EVENT_SUBJECT_PREFIX}.{EVENT_PREFIX[service]}.>")
    if service in CONSUMES:
        publish += _consumer_api(durables, CONSUMES[service])
    # `<subject> <queue>`: the server lets this user subscribe to its requests in its queue group only.
    requests = [f"{own} {service}"] if service != "gateway" else []
    subscribe = [*requests, f"{inbox_prefix(service)}.>"]
    return {"publish": {"allow": publish}, "subscribe": {"allow": subscribe}, "allow_responses": True}


def tester_permissions() -> dict[str, Any]:
    admin = [f"{JS_API}.STREAM.{op}.>" for op in ("DELETE", "PURGE", "UPDATE", "MSG.DELETE")]
    return {"publish": {"allow": [">"], "deny": admin}, "subscribe": {"allow": [">"]}}


def durable_name(prefix: str, event_type: str) -> str:
    """The durable consumer of `event_type` for a service whose consumers are named `prefix` (its name, or a
    test's own): `workspace_publication_committed`."""
    return f"{prefix}_{event_type.replace('.', '_')}"


def workspace_durables(prefix: str = "workspace") -> dict[str, str]:
    """Durable consumer name → the event subject it follows (the workspace service's own naming)."""
    return {durable_name(prefix, event.name): event.subject for event in consumed_by("workspace")}


def server_accounts(
    passwords: Mapping[str, str],
    *,
    durables: Iterable[str] | None,
    with_tester: bool = False,
    outside_max_consumers: int = outside.MAX_CONSUMERS_DEFAULT,
) -> dict[str, Any]:
    """The `accounts` of the server config: every process (and the tester) in the internal account, the
    outside subscribers in theirs, the mirror and its guard in a third (shared.outside), which holds at
    most `outside_max_consumers` consumers."""
    names = list(durables) if durables is not None else None
    internal = [
        {"user": name, "password": passwords[name], "permissions": service_permissions(name, names)}
        for name in ALL_PROCESSES
    ]
    if with_tester:
        internal.append({"user": TESTER_USER, "password": passwords[TESTER_USER], "permissions": tester_permissions()})
    events = {"user": EVENTS_USER, "password": passwords[EVENTS_USER], "permissions": outside.events_permissions()}
    admin = {"user": OUTSIDE_ADMIN, "password": passwords[OUTSIDE_ADMIN], "permissions": outside.admin_permissions()}
    return {
        INTERNAL_ACCOUNT: {"jetstream": "enabled", "users": internal, "exports": outside.internal_exports()},
        MIRROR_ACCOUNT: {
            "jetstream": outside.mirror_jetstream(outside_max_consumers),
            "users": [admin],
            "imports": outside.mirror_imports(),
            "exports": outside.mirror_exports(),
        },
        OUTSIDE_ACCOUNT: {"users": [events], "imports": outside.outside_imports()},
    }


def password_hash(password: str) -> str:
    """The bcrypt hash the server keeps instead of the password (it accepts `$2a$`/`$2b$` hashes).

    The passwords are random (shared.secretfiles.new_password, 192 bits), so no cost makes guessing them
    any harder; it is kept low because the server pays it on every connection.
    """
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=BCRYPT_ROUNDS)).decode()


def accounts_block(accounts: dict[str, Any], *, hashed: bool = True) -> str:
    """The server config's accounts, each password replaced by its bcrypt hash (`hashed=False` for
    deployment templates whose hashes are `$VARIABLE`s the server fills in from its environment)."""
    if hashed:
        accounts = json.loads(json.dumps(accounts))
        for account in accounts.values():
            for user in account["users"]:
                user["password"] = password_hash(user["password"])
    # JSON is valid NATS config syntax, and it quotes every subject ($, > and * included) safely.
    return "accounts: " + json.dumps(accounts, indent=2) + "\n"


def password_variable(user: str) -> str:
    """The environment variable holding a user's bcrypt hash in double quotes (`"$2b$..."`: NATS reads a
    variable's value as config, where an unquoted `$` would start another variable)."""
    return f"NATS_{user.upper()}_PASSWORD_HASH"


DEPLOYED_USERS = (*ALL_PROCESSES, EVENTS_USER, OUTSIDE_ADMIN)


def deployment_authorization() -> str:
    """`deploy/nats/auth.conf`: the same accounts for compose and the cluster, hashes from the environment.

    NATS substitutes `$NAME` only where it stands unquoted, so those values are unquoted here.
    """
    accounts = server_accounts({n: f"${password_variable(n)}" for n in DEPLOYED_USERS}, durables=workspace_durables())
    text = accounts_block(accounts, hashed=False)
    for name in DEPLOYED_USERS:
        text = text.replace(f'"${password_variable(name)}"', f"${password_variable(name)}")
    return "# Generated by `make generated` (shared/natsauth.py); do not edit by hand.\n" + text


def user_passwords(home: Path, *, with_tester: bool = False) -> dict[str, str]:
    names = [*ALL_PROCESSES, EVENTS_USER, OUTSIDE_ADMIN, *([TESTER_USER] if with_tester else [])]
    return secret_table(home / "nats" / "users.json", names)


def connect_options(settings: CommonSettings) -> dict[str, Any]:
    """Keyword arguments for `nats.connect` / `NatsBroker`: the service's user and its own reply inbox."""
    if not settings.nats_user:
        return {}
    return {
        "user": settings.nats_user,
        "password": settings.nats_password,
        "inbox_prefix": inbox_prefix(settings.nats_user),
    }


def broker_options(settings: CommonSettings) -> dict[str, Any]:
    """The same for FastStream's `NatsBroker`, which takes the user through `security=`."""
    options = connect_options(settings)
    if not options:
        return {}
    from faststream.nats.security import NatsUserPassword  # services only: the gateway never loads FastStream

    security = NatsUserPassword(username=options["user"], password=options["password"])
    return {"security": security, "inbox_prefix": options["inbox_prefix"]}


def main(argv: list[str]) -> None:
    """`python -m shared.natsauth` prints deploy/nats/auth.conf; `... hash` reads a password on stdin and
    prints the quoted hash its NATS_<USER>_PASSWORD_HASH variable holds."""
    if argv[1:] == ["hash"]:
        print(json.dumps(password_hash(sys.stdin.readline().strip())))
    else:
        print(deployment_authorization(), end="")


if __name__ == "__main__":
    main(sys.argv)
