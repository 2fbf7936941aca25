"""The Hub token in use, found without importing huggingface_hub's HTTP stack at pytest start-up."""

from __future__ import annotations

import os
import sys

from huggingface_hub import constants as hf_constants

_memo: dict[tuple[str | None, ...], str | None] = {}


def hub_token() -> str | None:
    """The token huggingface_hub would send, or None; never raises.

    Memoized on the settings it depends on, since redaction asks for every report with text.
    """
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


__all__ = ["hub_token", "token_set"]
