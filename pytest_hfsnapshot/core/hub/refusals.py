"""A refused Hub access: what it means for a test, and what the user should do about it."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from ...errors import AuthError
from ...request import repo_path
from ...settings import pytest_command
from . import retry
from .causes import chain, safe_attr

#: Values of :attr:`pytest_hfsnapshot.errors.AuthError.reason`, also returned by :func:`classify_auth`.
AUTH_REASONS = ("gated", "unauthorized", "not_found_or_private", "invalid_token")


def skips(reason: str, *, private: bool) -> bool:
    """Whether tests meeting this refusal get the ``on_auth_error`` action (skip by default) rather than fail.

    A gated repo, or a token without access, is what a fork PR without secrets meets: skip. A repo
    the Hub does not show is a typo as often as a private repo, and without a token the Hub cannot
    tell them apart: it skips only when its declaration says ``private=True``. A rejected token
    (invalid or expired) is always a failure: the run has a token, and it is wrong.
    """
    if reason == "invalid_token":
        return False
    if reason == "not_found_or_private":
        return private
    return True


def find_auth_error(exc: BaseException) -> BaseException | None:
    """The exception in the chain of ``exc`` that makes it a refused Hub access, or None.

    Our own :class:`~pytest_hfsnapshot.errors.AuthError` first (its reason is already decided);
    otherwise the link :func:`~pytest_hfsnapshot.core.hub.retry.classify` decided on.
    """
    own = _own_refusal(exc)
    if own is not None:
        return own
    kind = retry.classify(exc)
    return kind.decisive if kind.kind == "auth" else None


def classify_auth(exc: BaseException) -> str | None:
    """One of :data:`AUTH_REASONS` when ``exc`` (or anything it was raised from) is a refused Hub
    access; None otherwise.
    """
    own = _own_refusal(exc)
    if own is not None:
        return own.reason if own.reason in AUTH_REASONS else "unauthorized"
    kind = retry.classify(exc)
    if kind.kind != "auth":
        return None
    return kind.auth_reason or "unauthorized"


def _own_refusal(exc: BaseException) -> AuthError | None:
    return next((link for link in chain(exc) if isinstance(link, AuthError)), None)


def auth_repo(exc: BaseException) -> tuple[str, str] | None:
    """``(repo_id, repo_type)`` of the refused repo when the error chain names it."""
    found = find_auth_error(exc)
    repo_id = getattr(found, "repo_id", None)
    if isinstance(repo_id, str) and repo_id:
        repo_type = getattr(found, "repo_type", None)
        return repo_id, repo_type if isinstance(repo_type, str) and repo_type else "model"
    # huggingface_hub 1.x errors do not carry the repo: read it from the refused URL.
    url = getattr(safe_attr(found, "response"), "url", None)
    return _repo_from_url(str(url)) if url is not None else None


_API_PATH = re.compile(r"/api/(?P<type>models|datasets|spaces)/(?P<repo>[^/?#]+/[^/?#]+)")
_RESOLVE_PATH = re.compile(r"/(?:(?P<type>datasets|spaces)/)?(?P<repo>[^/?#]+/[^/?#]+)/resolve/")


def _repo_from_url(url: str) -> tuple[str, str] | None:
    path = urlsplit(url).path
    match = _API_PATH.search(path) or _RESOLVE_PATH.search(path)
    if match is None:
        return None
    repo_type = (match.group("type") or "models").removesuffix("s")
    return unquote(match.group("repo")), repo_type


def repo_url(endpoint: str, repo_id: str, repo_type: str = "model") -> str:
    """The repo's page on the Hub, where gated conditions are accepted."""
    return f"{endpoint.rstrip('/')}/{repo_path(repo_id, repo_type)}"


def auth_message(
    reason: str,
    *,
    repo_id: str | None,
    repo_type: str = "model",
    revision: str | None = None,
    endpoint: str,
    token_set: bool,
    private: bool = False,
) -> str:
    """One line saying which repo refused access, why, and what to do next. Never holds the token."""
    hub = endpoint.rstrip("/")
    if repo_id is None:
        what = "a Hub repo"
        url = f"{hub}/<repo>"
    else:
        what = repo_path(repo_id, repo_type) + (f"@{revision}" if revision else "")
        url = repo_url(endpoint, repo_id, repo_type)
    if reason == "invalid_token":
        return (
            f"the Hub at {hub} rejected the token for {what}: the token in use is invalid or expired. "
            "Set HF_TOKEN to a valid token (or run `hf auth login` again), or unset it for public repos"
        )
    if reason == "gated":
        why = "the token in use has not been granted access" if token_set else "no Hub token is set"
        return f"{what} is gated and {why}: accept the conditions at {url} and set HF_TOKEN to a token of that account"
    if reason == "unauthorized":
        why = "for the token in use" if token_set else "and no Hub token is set"
        return f"the Hub refused {what} (401/403) {why}: set HF_TOKEN to a token that can read it"
    no_reader = "the token in use cannot read it" if token_set else "no Hub token is set"
    if private:
        return (
            f"{what} is declared private=True and {no_reader}: set HF_TOKEN to a token that can read it "
            f"(the Hub at {hub} does not show it otherwise; if it should be public, check the repo id)"
        )
    return (
        f"{what} was not found at {hub}: either the repo id is misspelt, or the repo is private and "
        f"{no_reader}. Check the repo id and repo_type; for a private repo, declare it with private=True "
        "so that its tests skip without a token that can read it, and set HF_TOKEN to such a token to run them"
    )


def replay_refused(*, recorded_token_set: bool, token_set: bool) -> bool:
    """Whether a refusal recorded by an earlier online run still stands for this (offline) run.

    Only under the same token situation (set or unset): a refusal without a token says nothing of
    the token set now, and the other way round. Nothing about the token itself is ever recorded.
    """
    return recorded_token_set == token_set


def not_replayed_message(label: str, *, recorded_token_set: bool, cache_dir: str) -> str:
    """The offline failure when the recorded refusal was met under another token situation."""
    then = (
        "when a Hub token was set, and none is set now"
        if recorded_token_set
        else ("when no Hub token was set, and a token is set now")
    )
    return (
        f"{label} is not cached: the Hub refused it during an earlier online run {then}; prefetch it online "
        f"with the current token (`{pytest_command('prefetch_only')}` or `pytest-hfsnapshot prefetch --repo ...`) "
        f"into {cache_dir}"
    )


__all__ = [
    "AUTH_REASONS",
    "auth_message",
    "auth_repo",
    "classify_auth",
    "find_auth_error",
    "not_replayed_message",
    "replay_refused",
    "repo_url",
    "skips",
]
