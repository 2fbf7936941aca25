"""The values a user chooses between, each spelled once for the plugin's options, the CLI and prefetch."""

from __future__ import annotations

from typing import Literal, get_args

#: What a test needing a snapshot the Hub refuses does (``--hf-on-auth-error``).
AuthAction = Literal["skip", "xfail", "fail"]
#: What a test needing a snapshot that is not fully cached does offline (``--hf-on-missing``).
MissingAction = Literal["fail", "skip"]
#: How cached files are re-checked (``--hf-verify``).
VerifyMode = Literal["size", "sha256"]

AUTH_ACTIONS: tuple[AuthAction, ...] = get_args(AuthAction)
MISSING_ACTIONS: tuple[MissingAction, ...] = get_args(MissingAction)
VERIFY_MODES: tuple[VerifyMode, ...] = get_args(VerifyMode)

__all__ = ["AUTH_ACTIONS", "MISSING_ACTIONS", "VERIFY_MODES", "AuthAction", "MissingAction", "VerifyMode"]
