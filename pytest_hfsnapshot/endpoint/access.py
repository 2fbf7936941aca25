"""Which tokens may read a repo's cached files through the session endpoint.

A cached file costs no request, so the Hub cannot refuse a token there: the endpoint does. It serves
a repo's files to a token the Hub served them to this session (digests kept in memory), or to anyone
when the repo is open; else it asks the Hub once. Offline, CONTRACT section 3's token rule."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..core._hf_compat import raise_for_answer
from ..core.cache import state
from ..core.cache.layout import RepoCache
from ..core.hub import hub_calls
from ..core.implicit import local_answers
from ..core.own_work import own_work
from .replies import Reply, for_error, gave_up

#: The digest standing for "no token".
NONE = "none"
#: A declared snapshot's refusal reasons, as the Hub's error codes.
_CODES = {"gated": "GatedRepo"}


def digest(token: str | None) -> str:
    """What is kept of a token: its sha256, never the token."""
    return hashlib.sha256(token.encode()).hexdigest() if token else NONE


class Access:
    """The grants the Hub made in this process (:meth:`seen` is the observer's listener) and the check."""

    def __init__(self, upstream: str, cache_dir: Callable[[], Path]) -> None:
        self._upstream = upstream
        self._cache_dir = cache_dir
        self._lock = threading.Lock()
        #: (repo type, repo id, token digest) the Hub served files to.
        self._granted: set[tuple[str, str, str]] = set()
        #: (cache, repo type, repo id) -> open (read from the cache's state once).
        self._open: dict[tuple[str, str, str], bool] = {}

    def seen(self, response: Any) -> None:
        """An answer of the Hub: a file (or its Xet token) served is a grant to the token that asked."""
        status = int(response.status_code)
        served = 200 <= status < 300 or (300 <= status < 400 and "X-Repo-Commit" in response.headers)
        if not served:
            return
        request = response.request
        call = hub_calls.parse(str(request.url), self._upstream)
        if call is None or call.kind not in ("file", "xet-token"):
            return
        token = bearer(request.headers.get("authorization"))
        with self._lock:
            self._granted.add((call.repo_type, call.repo_id, digest(token)))
        if token is None:
            cache = self._cache_dir()
            with self._lock:
                self._open[(str(cache), call.repo_type, call.repo_id)] = True
            state.remember_open(RepoCache(cache, call.repo_id, call.repo_type))

    def allows(self, repo_type: str, repo_id: str, token: str | None) -> bool:
        """Whether the Hub is known to serve the repo's files to ``token`` (open, or granted to it).

        Asked for every file a child loads: the cache's state is read once per repo, and no
        ``RepoCache`` (which resolves the cache's path on the disk) is made once it is known.
        """
        with self._lock:
            if (repo_type, repo_id, digest(token)) in self._granted:
                return True
        cache = self._cache_dir()
        key = (str(cache), repo_type, repo_id)
        with self._lock:
            known = self._open.get(key)
        if known is None:
            known = state.known_open(RepoCache(cache, repo_id, repo_type))
            with self._lock:
                self._open[key] = known
        return known

    def check(self, call: hub_calls.HubCall, commit: str, token: str | None, *, offline: bool) -> Reply | None:
        """None when ``token`` may have the file ``call`` names at ``commit``; else the refusal to send."""
        if self.allows(call.repo_type, call.repo_id, token):
            return None
        if offline:
            return _standing_refusal(RepoCache(self._cache_dir(), call.repo_id, call.repo_type), token)
        for sent in dict.fromkeys((None, token)):
            refused = self._ask(call, commit, sent)
            if refused is None:
                return None
        return refused

    def _ask(self, call: hub_calls.HubCall, commit: str, token: str | None) -> Reply | None:
        """Ask the Hub for the file's metadata with ``token``; its grant is :meth:`seen`, its refusal returned."""
        import huggingface_hub

        prefix = {"dataset": "datasets/", "space": "spaces/"}.get(call.repo_type, "")
        url = f"{self._upstream}/{prefix}{call.repo_id}/resolve/{commit}/{quote(call.path)}"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            with own_work():  # no implicit use: the check is the endpoint's own
                response = huggingface_hub.get_session().head(url, headers=headers, follow_redirects=False)
        except Exception as error:
            return gave_up(
                f"pytest-hfsnapshot could not ask the Hub whether this request may read {call.repo_id}: {error}"
            )
        self.seen(response)  # also when the observer's listener saw it: a grant is kept once
        if self.allows(call.repo_type, call.repo_id, token):
            return None
        try:
            raise_for_answer(response)
        except Exception as error:
            return for_error(error, offline=False)
        return gave_up(f"the Hub answered {response.status_code} for {call.repo_id}'s files")


def _standing_refusal(repo: RepoCache, token: str | None) -> Reply | None:
    """Offline: the refusal kept for the repo, when it was met with the request's token situation."""
    for kept in (state.recalled_implicit_refusal(repo), state.recalled_refusal(repo)):
        if not isinstance(kept, dict) or bool(kept.get("token_set")) != (token is not None):
            continue
        code = str(kept.get("code") or _CODES.get(str(kept.get("reason")), "RepoNotFound"))
        made = local_answers.refusal(code)
        return Reply(made.status, dict(made.headers), b"")
    return None


def bearer(value: str | None) -> str | None:
    """The token of an ``Authorization: Bearer ...`` header, or None."""
    if value is None or not value.lower().startswith("bearer "):
        return None
    return value[len("bearer ") :].strip() or None


__all__ = ["NONE", "Access", "bearer", "digest"]
