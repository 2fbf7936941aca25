"""huggingface_hub's offline switch, read from the environment again and forced for a run.

huggingface_hub reads ``HF_HUB_OFFLINE`` once, at import, maybe before it was set: so it is read
here again, and forcing it patches the constant here and sets the variable for children."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from huggingface_hub import constants as hf_constants

#: datasets' own offline switch; its module ``datasets.config`` holds what it read at import.
DATASETS_OFFLINE = "HF_DATASETS_OFFLINE"
_DATASETS_CONFIG = "datasets.config"


def env_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set to a true value, as huggingface_hub reads it."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in hf_constants.ENV_VARS_TRUE_VALUES


def force_offline(*, datasets_hub_path: bool = False) -> Callable[[], None]:
    """Turn offline mode on for this process and its children; returns the function that undoes it.

    ``datasets_hub_path``: the session answers huggingface_hub's requests about recorded snapshots
    from the cache (implicit use), so ``datasets.load_dataset`` is left on its Hub path, which reads
    what a prefetch made ready (``HF_DATASETS_OFFLINE=0``, unless the user set it). Its requests go
    through huggingface_hub, which still lets none out.
    """
    undo: list[Callable[[], None]] = [_set_env("HF_HUB_OFFLINE", "1"), _set(hf_constants, "HF_HUB_OFFLINE", True)]
    if datasets_hub_path and DATASETS_OFFLINE not in os.environ:
        undo.append(_set_env(DATASETS_OFFLINE, "0"))
        config = sys.modules.get(_DATASETS_CONFIG)  # imported already: what it read is patched too
        if config is not None:
            undo.extend(_set(config, name, False) for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))

    def restore() -> None:
        while undo:
            undo.pop()()

    return restore


def _set_env(name: str, value: str) -> Callable[[], None]:
    old = os.environ.get(name)
    os.environ[name] = value

    def restore() -> None:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old

    return restore


def _set(owner: object, name: str, value: object) -> Callable[[], None]:
    had, old = hasattr(owner, name), getattr(owner, name, None)
    setattr(owner, name, value)

    def restore() -> None:
        if had:
            setattr(owner, name, old)
        else:
            delattr(owner, name)

    return restore


__all__ = ["DATASETS_OFFLINE", "env_offline", "force_offline"]
