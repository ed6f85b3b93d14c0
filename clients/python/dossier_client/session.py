"""`RunSession`: one agent's hold on an external run, its lease renewed by a background thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from dossier_client import _routes as r
from dossier_client import models as m
from dossier_client._lease import LeaseKeeper, limit_error
from dossier_client._transport import send
from dossier_client.errors import Conflict, DossierError, LeaseExpired, LeaseLost

if TYPE_CHECKING:
    from dossier_client.client import Dossier

T = TypeVar("T")
JOIN_SECONDS = 5.0
Target = m.Hit | m.Ref | m.Passage | m.ResumeRead | dict[str, Any] | str


class RunSession:
    """A run you drive. Every call is one step of the run under its lease; the lease is renewed in the
    background at about a third of its length. Leaving the `with` block stops the renewals and leaves the
    run running (another session may `take_over` it); `finish` ends it.

    Once another session holds the run, the next call raises `LeaseLost`. When this session's own lease
    has run out (the renewals could not get through) and nobody took the run, the session takes it over
    itself and goes on."""

    def __init__(
        self,
        dossier: Dossier,
        run_id: str,
        lease: m.Lease,
        *,
        admitted: m.Run | None = None,
        resume: m.Resume | None = None,
    ):
        self.dossier, self.run_id = dossier, run_id
        self.admitted, self.resume = admitted, resume
        self._keeper = LeaseKeeper(lease)
        self._retaking = threading.Lock()
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew_loop, name=f"dossier-lease-{run_id}", daemon=True)
        self._renewer.start()

    @property
    def lease(self) -> m.Lease:
        return self._keeper.lease

    def __enter__(self) -> RunSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop renewing the lease (the run stays as it is)."""
        self._stop.set()
        if self._renewer is not threading.current_thread():
            # A renewal under way ends within its own timeout; the session does not wait that long.
            self._renewer.join(timeout=JOIN_SECONDS)

    # -- the run's calls -------------------------------------------------------------------------------

    def catalog(self) -> m.Catalog:
        """The catalog as admitted (every item; `complete` and `omitted` say what the bound left out)."""
        return self._bound(lambda token: r.run_catalog(self.run_id, token))

    def search(self, q: str, limit: int = 10) -> list[m.Hit]:
        """Passages and earlier publications the run may read; each is recorded once as `listed`."""
        return self._bound(lambda token: r.run_search(self.run_id, token, q, limit))

    def read(self, target: Target, locator: str | None = None) -> m.Passage:
        """The material at its exact version, recorded as read: a hit, a ref, an evidence id or `pub_…@vN`.
        `passage.cite()` is how the answer cites it."""
        body = m.ref_to_read(target) | ({"locator": locator} if locator else {})
        return self._bound(lambda token: r.run_read(self.run_id, token, body))

    def write(self, path: str, text: str) -> None:
        """Write `plan.md`, `draft.md` or `notes/<name>.md` in the run's files."""
        self._bound(lambda token: r.run_write(self.run_id, token, path, text))

    def renew(self) -> m.Lease:
        lease = self._bound(lambda token: r.renew(self.run_id, token))
        self._keeper.renewed(lease)
        return lease

    def finish(
        self,
        answer: str,
        checkpoint: m.CheckpointUpdate | dict[str, Any] | None = None,
        *,
        title: str | None = None,
    ) -> m.Run:
        """End the run with its answer, which cites what the run read (`passage.cite()`); the completed Run."""
        done = self._bound(lambda token: r.finish(self.run_id, token, answer, title, checkpoint))
        self.close()
        return done

    def file(self, path: str) -> str:
        """One of the run's files (a source read before, a note, the plan)."""
        return self.dossier.run_file(self.run_id, path)

    def run(self) -> m.Run:
        return self.dossier.run(self.run_id)

    # -- tools for agent frameworks ---------------------------------------------------------------------

    def langchain_tools(self) -> list[Any]:
        """search, read, write_note and finish as LangChain tools (`pip install dossier-client[langchain]`)."""
        from dossier_client.tools import langchain_tools

        return langchain_tools(self)

    def openai_agents_tools(self) -> list[Any]:
        """search, read, write_note and finish as OpenAI Agents SDK tools (`dossier-client[agents]`)."""
        from dossier_client.tools import openai_agents_tools

        return openai_agents_tools(self)

    # -- the lease ------------------------------------------------------------------------------------

    def _bound(self, make: Callable[[str], r.Call[T]], *, retaken: bool = False) -> T:
        self._keeper.check()
        token = self.lease.token
        try:
            return self.dossier.do(make(token))
        except LeaseExpired as exc:
            if retaken:
                raise self._keeper.lose(exc) from None
            self._retake(self.dossier.http, token)
            return self._bound(make, retaken=True)
        except LeaseLost as exc:
            raise self._keeper.lose(exc) from None
        except Conflict as exc:
            raise self._why(exc) from None

    def _why(self, conflict: Conflict) -> DossierError:
        """A run-bound conflict of a run that a limit ended is that limit; else the conflict as it is."""
        try:
            return limit_error(self.run(), conflict)
        except DossierError:
            return conflict

    def _retake(self, http: httpx.Client, expired: str) -> None:
        """Take the run over after this session's own lease ran out; lost if another session holds it."""
        with self._retaking:
            if self.lease.token != expired:
                return  # taken over again already, by the other thread
            try:
                taken = r.take(self.run_id, False)
                self._keeper.renewed(taken.parse(send(http, taken.request)).lease)
            except DossierError as exc:
                raise self._keeper.lose(exc) from None

    def _renew_loop(self) -> None:
        with httpx.Client(**self.dossier.http_options()) as http:
            while not self._stop.wait(self._keeper.next_wait()):
                token = self.lease.token
                try:
                    call = r.renew(self.run_id, token)
                    self._keeper.renewed(call.parse(send(http, call.request)))
                except LeaseExpired:
                    try:
                        self._retake(http, token)
                    except LeaseLost:
                        return
                except DossierError as exc:
                    if not self._keeper.renewal_failed(exc):
                        return
