"""Rendering pages: the Jinja2 environment (autoescaping always on), the route class that turns every
failure into a readable page, and the small helpers every page module shares."""

from __future__ import annotations

import gzip
import logging
import re
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup, escape
from pydantic import TypeAdapter, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.gateway.web.security import (
    CsrfRefused,
    SignInRequired,
    check_csrf,
    csrf_token,
    presession,
    session_actor,
    set_presession,
)
from shared.bus import BusClient, validation_details
from shared.contracts.common import Actor, Model, Q, Subject
from shared.errors import HTTP_STATUS, DomainError, Invalid, NotFound, RateLimited
from shared.markdown import Known, render_markdown

log = logging.getLogger("dossier.gateway.web")

TEMPLATES = Path(__file__).parent / "templates"
# Every template is HTML: escape everything, whatever the file name says.
env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True, lstrip_blocks=True)
env.filters["q"] = lambda value: quote(str(value), safe="")
_TIME = TypeAdapter(datetime)
# A time as the API writes it (ISO 8601, `Z` for UTC): what a `<time datetime>` holds and its text is cut from.
env.filters["stamp"] = lambda value: _TIME.dump_python(value, mode="json")


def _markdown(text: str, shift: int = 2, known: Known | None = None) -> Markup:
    # Safe to mark: raw HTML is off in the renderer, so everything a document wrote comes out escaped.
    return Markup(render_markdown(text, known=known, shift=shift))


env.filters["markdown"] = _markdown


def snippet_marks(snippet: str) -> Markup:
    """A search hit's snippet, its highlights (between `<<` and `>>`) as `<mark>`, the rest escaped."""
    out, at = [], 0
    for m in re.finditer(r"<<(.*?)>>", snippet, re.S):
        out += [escape(snippet[at : m.start()]), Markup("<mark>{}</mark>").format(m[1])]
        at = m.end()
    out.append(escape(snippet[at:]))
    return Markup("").join(out)


env.filters["marks"] = snippet_marks
# Answers made before runs titled them by their question were titled "Run <run id>: <question>".
env.filters["titled"] = lambda title: re.sub(r"^Run run_\w+: ", "", str(title))

# What each policy does with what it read, said on the run's page beside its answer.
POLICY_NATURE = {
    "extractive": "The extractive policy quotes the sentences it found most relevant in each source it read; "
    "it does not weigh them or draw a conclusion. Read the quotes and judge for yourself.",
    "openai": "A language model wrote this answer from the sources it read; each cited sentence is checked "
    "against its passage on the publication's page.",
}
env.globals["policy_nature"] = POLICY_NATURE

TITLES = {
    "not_found": "Not found",
    "unauthenticated": "Sign-in needed",
    "invalid": "That did not work",
    "conflict": "Conflict",
    "unavailable": "Unavailable",
    "too_large": "Too large",
    "unsupported": "Unsupported file",
    "rate_limited": "Too many requests",
    "overloaded": "Busy",
    "timeout": "No answer in time",
    "internal": "Something went wrong",
}


def render(request: Request, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
    binding = getattr(request.state, "binding", None) or presession(request)
    actor: Actor | None = getattr(request.state, "actor", None)
    html = env.get_template(template).render(
        request=request,
        actor=actor,
        csrf=csrf_token(request, binding),
        notice=request.query_params.get("notice"),
        **context,
    )
    response = HTMLResponse(html, status_code=status)
    _gzip(request, response)
    set_presession(request, response)
    return response


# A page smaller than this goes as it is: compressing it saves less than the header costs.
GZIP_FLOOR = 1024


def _gzip(request: Request, response: HTMLResponse) -> None:
    """A rendered page, whole in memory, compressed for a browser that accepts gzip (pages only: downloads and
    live streams are never buffered by this)."""
    response.headers["Vary"] = "Accept-Encoding"
    accepted = {part.split(";")[0].strip().lower() for part in request.headers.get("accept-encoding", "").split(",")}
    if "gzip" not in accepted or len(response.body) < GZIP_FLOOR:
        return
    response.body = gzip.compress(response.body, compresslevel=6)
    response.headers["Content-Encoding"] = "gzip"
    response.headers["Content-Length"] = str(len(response.body))


def error_page(request: Request, code: str, message: str, details: dict[str, Any] | None = None) -> HTMLResponse:
    return render(
        request,
        "error.html",
        status=HTTP_STATUS.get(code, 500),
        heading=TITLES.get(code, "Something went wrong"),
        code=code,
        message=message,
        details=details or {},
    )


def go(path: str, notice: str | None = None) -> RedirectResponse:
    """POST-redirect-GET: a state change answers 303 to the page that shows its outcome."""
    if notice:
        path += ("&" if "?" in path else "?") + "notice=" + quote(notice)
    return RedirectResponse(path, status_code=303)


def _next(request: Request) -> str:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return "/signin?next=" + quote(target, safe="")


class WebRoute(APIRoute):
    """Every failure of a page becomes a page: the envelope's message, never a trace or a blank page."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        original = super().get_route_handler()

        async def handler(request: Request) -> Response:
            try:
                return await original(request)
            except SignInRequired:
                return RedirectResponse(_next(request) if request.method == "GET" else "/signin", status_code=303)
            except CsrfRefused:
                return render(request, "refused.html", status=403)
            except RateLimited as exc:
                page = error_page(request, exc.code, exc.message, exc.details)
                page.headers["Retry-After"] = str(exc.retry_after)
                return page
            except DomainError as exc:
                return error_page(request, exc.code, exc.message, exc.details)
            except RequestValidationError as exc:
                first = exc.errors()[0] if exc.errors() else {}
                field = ".".join(str(p) for p in first.get("loc", ()) if p not in ("query", "path", "body"))
                return error_page(request, "invalid", f"{field or 'input'}: {first.get('msg', 'invalid')}")
            except StarletteHTTPException as exc:
                code = "not_found" if exc.status_code == 404 else "invalid"
                return error_page(request, code, str(exc.detail))
            except Exception:
                log.exception("unhandled error on a workbench page")
                return error_page(request, "internal", "the server failed to show this page")

        return handler


async def signed_in(request: Request) -> Actor:
    """Dependency of every page but sign-in: the cookie's actor, or a redirect to the sign-in page."""
    actor = await session_actor(request)
    if actor is None:
        raise SignInRequired
    request.state.actor = actor
    return actor


def bus_of(request: Request) -> BusClient:
    client: BusClient = request.app.state.bus
    return client


async def checked_form(request: Request) -> dict[str, Any]:
    """The posted form, after its CSRF token is checked; repeated fields (checkboxes) become lists."""
    form = await request.form()
    check_csrf(request, getattr(request.state, "binding", None), form.get("csrf"))
    values: dict[str, Any] = {}
    for key in form:
        items = [v for v in form.getlist(key) if isinstance(v, str)]
        for value in items:
            if "\x00" in value:
                raise Invalid(f"the field '{key}' holds a NUL character", {"field": key})
        values[key] = items if len(items) > 1 else (items[0] if items else "")
    return values


def field(form: dict[str, Any], name: str) -> str:
    value = form.get(name, "")
    return value if isinstance(value, str) else (value[0] if value else "")


def number(form: dict[str, Any], name: str) -> int:
    raw = field(form, name).strip()
    if not raw.isdigit():
        raise Invalid(f"the field '{name}' must be a whole number", {"field": name})
    return int(raw)


def problem(exc: DomainError, fields: dict[str, str], default: str) -> dict[str, str]:
    """A refusal placed beside the form field it is about: {element id: message}.

    `fields` maps the contract's field names to the page's element ids; a refusal about no known field lands
    beside `default` (the form's main field), so it is still next to what the person typed.
    """
    named = str(exc.details.get("field", ""))
    message = str(exc.details.get("problem") or exc.message)
    if exc.code != "invalid":
        message = exc.message
    return {fields.get(named, default): message}


M = TypeVar("M", bound=Model)
T = TypeVar("T")


def build(model: type[M], /, **data: Any) -> M:
    """A contract built from form fields and the address; a malformed field is `invalid`, named, like the API says."""
    try:
        return model(**data)
    except ValidationError as exc:
        details = validation_details(exc)
        raise Invalid(f"{details['field']}: {details['problem']}", details) from exc


def exc_status(exc: DomainError) -> int:
    return HTTP_STATUS.get(exc.code, 500)


async def optional(call: Awaitable[T], refused: type[DomainError] = NotFound) -> T | None:
    """What the owner answers, or None when it refuses as `refused`: the page shows the rest without it.

    Pass a call made beforehand (`optional(read)`, `map(optional, reads)`): written inline inside
    `asyncio.gather`, mypy would take the call's reply type from this function's `T | None`."""
    try:
        return await call
    except refused:
        return None


async def submit(
    request: Request,
    actor: Actor,
    subject: Subject[Q, Any],
    make: Callable[[dict[str, Any]], Q],
    target: str,
    notice: str | None = None,
) -> RedirectResponse:
    """A form that asks one thing of an owner: the form is checked, `make` turns it into the request, and the
    answer is a redirect to the page that shows the outcome (`go`)."""
    form = await checked_form(request)
    await bus_of(request).call(subject, make(form), actor=actor)
    return go(target, notice)
