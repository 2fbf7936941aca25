"""The Hub token in use, found without importing huggingface_hub's HTTP stack at pytest start-up."""

from __future__ import annotations

import os
import sys
import threading

from huggingface_hub import constants as hf_constants

_memo: dict[tuple[str | None, ...], str | None] = {}
#: The token a thread sends on another process's behalf (see :func:`sending`).
_sent = threading.local()


class sending:  # lower case: used as the function it was, ``with sending(token):``
    """This thread acts for a process that sends ``token`` (None: none): :func:`hub_token` and
    :func:`sent_token` say so here, for the session endpoint serving a test's child process.

    A class, not a generator: it is entered for every request a session endpoint answers."""

    __slots__ = ("_before", "_token")

    def __init__(self, token: str | None) -> None:
        self._token: str | None = token
        self._before: object = _sent

    def __enter__(self) -> None:
        self._before = getattr(_sent, "token", _sent)
        _sent.token = self._token

    def __exit__(self, *exc: object) -> None:
        if self._before is _sent:
            del _sent.token
        else:
            _sent.token = self._before


def sent_token() -> str | bool | None:
    """The token to pass huggingface_hub in this thread: the one :func:`sending` names (False for
    none), else None (huggingface_hub's own lookup)."""
    token = getattr(_sent, "token", _sent)
    if token is _sent:
        return None
    return token if isinstance(token, str) else False


def hub_token() -> str | None:
    """The token huggingface_hub would send, or None; never raises.

    Memoized on the settings it depends on, since redaction asks for every report with text.
    In a thread inside :func:`sending`, the token sent there.
    """
    sent = getattr(_sent, "token", _sent)
    if sent is not _sent:
        return sent if isinstance(sent, str) else None
    key = (
        os.environ.get("HF_TOKEN"),
        os.environ.get("HUGGING_FACE_HUB_TOKEN"),
        os.environ.get("HF_OIDC_RESOURCE"),
        hf_constants.HF_TOKEN_PATH,
    )
    if key not in _memo:
        _memo[key] = _look_up(key[0] or key[1], oidc=bool(key[2]), path=key[3])
    return _memo[key]


def token_set() -> bool:
    """True when a Hub token is configured."""
    return hub_token() is not None


def _look_up(from_env: str | None, *, oidc: bool, path: str) -> str | None:
    if not oidc and "google.colab" not in sys.modules:
        if from_env and from_env.strip():
            return from_env.strip()
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read().strip() or None
        except OSError:
            return None
    from huggingface_hub import get_token

    # get_token can raise (a failed OIDC exchange); for our messages that just means "no token".
    try:
        return get_token()
    except Exception:
        return None


__all__ = ["hub_token", "sending", "sent_token", "token_set"]
