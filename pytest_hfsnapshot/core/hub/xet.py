"""hf_xet's settings for the engine's transfers: a bounded download buffer, the user's own values kept.

hf_xet sizes its buffer from the machine's memory (per xdist worker) and reads the variables once,
at its first Xet download: a value set later changes nothing."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from types import MappingProxyType

__all__ = ["TRANSFER_SETTINGS", "USER_BUFFER_CHOICES", "transfer_settings"]

TRANSFER_SETTINGS: Mapping[str, str] = MappingProxyType(
    {
        # The buffer of one file's download is this plus the per-file part (384 MB); each further
        # file at once adds the per-file part, up to the limit (1 GB: six files at once). Why
        # 384 MB (a smaller one slows a fast link, a larger one only holds more): docs/benchmarks.md.
        "HF_XET_RECONSTRUCTION_DOWNLOAD_BUFFER_SIZE": "256mb",
        "HF_XET_RECONSTRUCTION_DOWNLOAD_BUFFER_PERFILE_SIZE": "128mb",
        "HF_XET_RECONSTRUCTION_DOWNLOAD_BUFFER_LIMIT": "1gb",
    }
)
"""The ``HF_XET_*`` values the engine's transfers run with, where the environment sets none."""

USER_BUFFER_CHOICES = ("HF_XET_HIGH_PERFORMANCE", "HF_XET_HP", "HF_XET_DISABLE_MEMORY_DERIVED_DOWNLOAD_BUFFERS")
"""Switches by which a user chooses hf_xet's buffer sizes: set to a true value, none of ours applies."""

# hf_xet's reading of a boolean variable (xet_runtime's parse_bool_value).
_TRUE = frozenset({"1", "true", "yes", "y", "on"})

_lock = threading.Lock()
_holders = 0
_added: dict[str, str] = {}


def _wanted() -> dict[str, str]:
    if any(os.environ.get(name, "").strip().lower() in _TRUE for name in USER_BUFFER_CHOICES):
        return {}
    return {name: value for name, value in TRANSFER_SETTINGS.items() if name not in os.environ}


@contextlib.contextmanager
def transfer_settings() -> Iterator[None]:
    """Set :data:`TRANSFER_SETTINGS` where unset for the block; thread-safe, nested blocks share one setting.

    The values set are taken out again when the last block open ends (prefetch threads overlap),
    unless something else changed them meanwhile.
    """
    global _holders
    with _lock:
        if _holders == 0:
            _added.update(_wanted())
            os.environ.update(_added)
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                for name, value in _added.items():
                    if os.environ.get(name) == value:
                        del os.environ[name]
                _added.clear()
