"""`dossier admin token create|list|revoke`, `dossier admin metrics` (the admin token), `dossier health` (none);
`dossier admin backup|restore|writes` are in dossier_cli/backups.py."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from dossier_cli import backups
from dossier_cli.client import CliError, client, seg, wants_json
from dossier_cli.commands import command
from dossier_cli.output import emit, err, out, print_json, table

admin = typer.Typer(help="Administration, with the admin token.", no_args_is_help=True)
token = typer.Typer(help="API tokens: issue, list, revoke.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    admin.add_typer(token, name="token")
    backups.register(admin)
    app.add_typer(admin, name="admin")
    command(app, "health")(health)


@command(token, "create")
def create(
    scope: Annotated[str, typer.Option(help="The tenant the token acts in.")],
    principal: Annotated[str, typer.Option(help="Who uses it (recorded with every request).")],
    expires_in: Annotated[
        int | None, typer.Option(min=1, metavar="SECONDS", help="Expire after this many seconds (default: never).")
    ] = None,
) -> None:
    """Issue a token. Its secret is printed once, alone on stdout (details go to stderr)."""
    body: dict[str, Any] = {"scope": scope, "principal": principal}
    if expires_in is not None:
        body["expires_in"] = expires_in
    with client(admin=True) as api:
        issued = api.json("POST", "/v1/admin/tokens", json=body)

    def human(t: dict[str, Any]) -> None:
        out().print(t["token"])
        expiry = t["expires_at"] or "never"
        err().print(f"token {t['id']} for {t['principal']} in scope {t['scope']}, expires: {expiry}")

    emit(issued, human)


@command(token, "list")
def list_tokens(scope: Annotated[str | None, typer.Option(help="Only this scope's tokens.")] = None) -> None:
    """Tokens that are not revoked (never their secrets), oldest first."""
    with client(admin=True) as api:
        data = api.collect("/v1/admin/tokens", scope=scope)
    rows = [(t["id"], t["scope"], t["principal"], t["expires_at"] or "never", t["created_at"]) for t in data["items"]]
    emit(data, lambda _: table(("ID", "SCOPE", "PRINCIPAL", "EXPIRES", "CREATED"), rows))


@command(token, "revoke")
def revoke(token_id: Annotated[str, typer.Argument(metavar="ID", help="A token id (tok_...).")]) -> None:
    """Revoke a token: every gateway refuses it within seconds."""
    with client(admin=True) as api:
        api.json("DELETE", f"/v1/admin/tokens/{seg(token_id)}")
    emit({"id": token_id, "revoked": True}, lambda _: err().print(f"revoked {token_id}"))


@command(admin, "metrics")
def metrics() -> None:
    """The gateway's Prometheus metrics (text format)."""
    with client(admin=True) as api:
        text = api.text("/metrics")
    if wants_json():
        print_json({"text": text})
    else:
        sys.stdout.write(text)


def health() -> None:
    """Whether every service answers (no token needed)."""
    with client(anonymous=True) as api:
        response = api.raw("GET", "/v1/health")
    try:
        data = response.json()
        services = dict(data["services"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(f"the gateway's health reply is not understood (HTTP {response.status_code})") from exc
    if wants_json():
        print_json(data)
    else:
        out().print(f"status: {data.get('status')}")
        table(("SERVICE", "STATUS"), sorted(services.items()))
    if response.status_code != 200:
        raise CliError(f"not healthy: {', '.join(n for n, s in sorted(services.items()) if s != 'ok')}")
