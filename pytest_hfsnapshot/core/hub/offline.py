"""huggingface_hub's offline switch, read from the environment again and forced for a run.

huggingface_hub reads ``HF_HUB_OFFLINE`` once, at import, maybe before it was set: so it is read
here again, and forcing it patches the constant here and sets the variable for children."""

from __future__ import annotations

import os
from collections.abc import Callable

from huggingface_hub import constants as hf_constants


def env_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set to a true value, as huggingface_hub reads it."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in hf_constants.ENV_VARS_TRUE_VALUES


def force_offline() -> Callable[[], None]:
    """Turn offline mode on for this process and its children; returns the function that undoes it."""
    old_constant = hf_constants.HF_HUB_OFFLINE
    old_env = os.environ.get("HF_HUB_OFFLINE")
    hf_constants.HF_HUB_OFFLINE = True
    os.environ["HF_HUB_OFFLINE"] = "1"

    def restore() -> None:
        hf_constants.HF_HUB_OFFLINE = old_constant
        if old_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old_env

    return restore


__all__ = ["env_offline", "force_offline"]
