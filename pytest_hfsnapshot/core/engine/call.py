"""One materialization's context: request, cache, layers, settings, and what its failures become."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from ...errors import HfSnapshotError, TransientError
from ...request import SnapshotRequest
from ...settings import Settings
from ..cache import pins
from ..cache.layers import Layers, layer_roots
from ..cache.layout import RepoCache
from ..cache.repair import Repairer
from ..hub import gate, outage, retry
from ..hub.credentials import token_set
from . import error_builders

log = logging.getLogger("pytest_hfsnapshot")

#: Wall-clock bound on one call's transient-failure handling, the client's own retries included.
RETRY_DEADLINE = 300.0


@dataclass(frozen=True)
class Call:
    """One materialization of ``request``; ``settings`` are resolved (a cache folder, an offline flag)."""

    request: SnapshotRequest
    settings: Settings
    repo: RepoCache
    layers: Layers
    repair: Repairer
    #: The commit the pin file gives the request's branch or tag; None when it is not listed.
    pin: str | None
    #: ``time.monotonic()`` at the start.
    started: float
    #: Whether giving up on the Hub itself makes the session remember an outage (see outage.py).
    remembers_outages: bool = True

    @classmethod
    def start(cls, request: SnapshotRequest, settings: Settings, *, remembers_outages: bool = True) -> Call:
        settings = settings.resolved()
        assert settings.cache_dir is not None and settings.offline is not None
        repo = RepoCache(settings.cache_dir, request.repo_id, request.repo_type)
        started = time.monotonic()
        layers = Layers(layer_roots(settings), cache_dir=repo.cache_dir, session=settings.session, label=request.label)
        repair = Repairer(repo, request.label, lock_timeout=settings.lock_timeout, layers=layers)
        pin = pins.load(settings.pins).commit_for(request) if settings.pins is not None else None
        return cls(request, settings, repo, layers, repair, pin, started, remembers_outages)

    @property
    def hash_all(self) -> bool:
        return self.settings.verify == "sha256"

    def retrier(self) -> retry.Retrier:
        """The retries of this call: ``settings.retries`` extra attempts, within :data:`RETRY_DEADLINE`."""
        backoff = retry.Backoff(retries=self.settings.retries, deadline=self.started + RETRY_DEADLINE)
        return retry.Retrier(backoff, self, waited_out=gate.holds)

    def token_set(self) -> bool:
        """Whether this call sends a token: the one given, or huggingface_hub's own lookup."""
        if isinstance(self.settings.token, str):
            return bool(self.settings.token)
        if self.settings.token is False:
            return False
        return token_set()

    # --- what failures become (retry.Failures) --------------------------------------------------
    def down(self, what: str) -> TransientError | None:
        down = outage.known(self.repo.cache_dir, self.settings.session, error_builders.hub())
        return None if down is None else error_builders.unreachable(self.request, down, what)

    def answered(self) -> None:
        outage.forget(self.repo.cache_dir, self.settings.session, error_builders.hub())

    def typed(self, error: BaseException, kind: retry.Classification) -> HfSnapshotError:
        if kind.kind == "revision_not_found" and self.pin is not None and self.settings.pins is not None:
            # Every request asked for the pinned commit: that commit, not the branch, is what is gone.
            return pins.missing_commit(self.settings.pins, self.request, self.pin, error_builders.hub())
        return error_builders.typed(
            self.request, error, kind, token_set=self.token_set(), cache_dir=self.repo.cache_dir
        )

    def gave_up(
        self,
        error: BaseException,
        kind: retry.Classification,
        attempts: int,
        what: str,
        filename: str | None,
        *,
        hub_call: bool,
    ) -> TransientError:
        """The give-up; an unreachable Hub (``hub_call``) is remembered for the session."""
        if hub_call and self.remembers_outages and (kind.status is None or kind.status >= 500):
            outage.remember(
                self.repo.cache_dir, self.settings.session, error_builders.hub(), error_builders.cause(kind)
            )
        return error_builders.gave_up(self.request, error, kind, attempts, what, filename, self.settings.retries)

    def retrying(self, what: str, kind: retry.Classification) -> None:
        log.info("hfsnapshot: retrying %s of %s after %s", what, self.request.label, error_builders.cause(kind))


__all__ = ["RETRY_DEADLINE", "Call"]
