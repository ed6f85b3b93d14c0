"""The Python client of Dossier: the API (`Dossier`, `AsyncDossier`) and run sessions for outside agents
(`external_run`, `take_over`) with tools for LangChain and the OpenAI Agents SDK."""

from dossier_client.aio import AsyncDossier
from dossier_client.aio_session import AsyncRunSession
from dossier_client.client import Dossier
from dossier_client.errors import (
    Conflict,
    DossierError,
    Forbidden,
    Invalid,
    LeaseExpired,
    LeaseLost,
    LimitReached,
    NotFound,
    RateLimited,
    TooLarge,
    Unauthenticated,
    Unavailable,
    Unreachable,
)
from dossier_client.models import Catalog, Hit, Lease, Passage, Ref, Resume, Run
from dossier_client.session import RunSession

__version__ = "0.1.0"
__all__ = [
    "AsyncDossier",
    "AsyncRunSession",
    "Catalog",
    "Conflict",
    "Dossier",
    "DossierError",
    "Forbidden",
    "Hit",
    "Invalid",
    "Lease",
    "LeaseExpired",
    "LeaseLost",
    "LimitReached",
    "NotFound",
    "Passage",
    "RateLimited",
    "Ref",
    "Resume",
    "Run",
    "RunSession",
    "TooLarge",
    "Unauthenticated",
    "Unavailable",
    "Unreachable",
]
