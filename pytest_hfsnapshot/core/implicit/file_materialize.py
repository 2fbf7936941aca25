"""One file made ready by the engine before library code reads it (implicit ``manage``).

What the Hub refuses or lacks is left to huggingface_hub, so library code gets the client's own exceptions."""

from __future__ import annotations

import re
from typing import NoReturn

from ...errors import (
    AuthError,
    EntryNotFoundError,
    HfSnapshotError,
    InvalidRequestError,
    OfflineMissingError,
    RevisionNotFoundError,
)
from ...request import SnapshotRequest
from ...settings import Settings
from .uses import Prepared

_GLOB = re.compile(r"([*?\[])")


def glob_escape(path: str) -> str:
    """An ``allow_patterns`` entry that matches exactly ``path`` (fnmatch's brackets around its wildcards)."""
    return _GLOB.sub(r"[\1]", path)


def prepare(repo_type: str, repo_id: str, revision: str, path: str, settings: Settings) -> Prepared | None:
    """Materialize ``path`` of ``repo_id`` at ``revision`` into ``settings.cache_dir``.

    None when the client should act alone: the Hub refused the repo or revision, the path or id is
    not one the plugin can ask for, or the run is offline without it. Raises huggingface_hub's
    ``LocalEntryNotFoundError`` carrying the plugin's message when transient failures, a lock or
    verification could not be got past.
    """
    from ..engine.engine import materialize_request

    try:
        request = SnapshotRequest.build(
            repo_id, revision=revision, repo_type=repo_type, allow_patterns=[glob_escape(path)]
        )
    except InvalidRequestError:
        return None
    try:
        snapshot = materialize_request(request, settings, warn_unmatched=False)
    except (AuthError, RevisionNotFoundError, EntryNotFoundError, InvalidRequestError, OfflineMissingError):
        return None
    except HfSnapshotError as error:
        _raise_as_client(error)
    fetched = snapshot.size if snapshot.source in ("download", "repair") else 0
    return Prepared(snapshot.commit, path in snapshot.files, fetched)


def warm() -> None:
    """Import the engine :func:`prepare` runs (it is not loaded at the plugin's start)."""
    from ..engine import engine  # noqa: F401


def _raise_as_client(error: HfSnapshotError) -> NoReturn:
    from huggingface_hub.errors import LocalEntryNotFoundError

    raise LocalEntryNotFoundError(str(error)) from error


__all__ = ["Prepared", "glob_escape", "prepare", "warm"]
