"""hf_xet's settings for the engine's transfers: a bounded download buffer, the user's own values kept.

hf_xet (huggingface_hub's Xet client) reads its settings, ``HF_XET_*`` environment variables, when
its ``XetSession`` is made, and huggingface_hub makes one per process, at the process's first Xet
download; a variable set after that changes nothing (measured with hf_xet 1.8). hf_xet 1.8 sizes its
download buffer (bytes fetched and not yet written) from the machine's memory: 1/16 of it, plus 1/64
per file being downloaded, up to 1/4. On a 24 GB machine a 1 GiB file is held (nearly) whole in
memory: a peak RSS of 0.6-1.1 GiB against 45 MiB before the call, in every xdist worker that
downloads one.

:func:`transfer_settings` sets :data:`TRANSFER_SETTINGS` in the environment while the engine
downloads, each variable only where the environment does not name it. It sets none of them when
the user chose how hf_xet sizes its buffers: high-performance mode (``HF_XET_HIGH_PERFORMANCE`` or
``HF_XET_HP``, large buffers on purpose) or ``HF_XET_DISABLE_MEMORY_DERIVED_DOWNLOAD_BUFFERS``.
When the engine's download is the process's first Xet transfer, hf_xet's session keeps these values
for the process's later Xet transfers too; when other code made the first one, the session keeps
what the environment said then.

What the buffer costs (measured through the local Hub, one 1 GiB file, bench workload 16): hf_xet
takes buffer for each term (a run of one xorb's chunks, up to 64 MiB) before fetching it, so the
buffer also bounds how many xorb ranges it fetches at once. The ranges in flight share the link and
end together, and the link idles while they are written and the next ones start; too few in flight
and the download slows. Behind a 200 MiB/s link (a CI runner's), against ``snapshot_download`` with
hf_xet's own buffer, medians of interleaved runs in two runs of 5 pairs: 256 MB for one file took
1.08-1.17 times as long (A with that buffer alone, 1.17), 384 MB 1.02-1.03, 512 MB 1.00-1.04 (each
run's pairs spread over 0.87-1.21). On raw loopback, where the download outruns the disk and the
buffer fills, the worker peaked at 299-300, 375-377 and 487-506 MiB RSS against A's 441-876 MiB.
The engine uses 384 MB for one file (256 MB plus the per-file 128 MB): 512 MB was no faster within
the runs' spread and held 110-130 MiB more, once more than A. Behind a link that caps each stream
(32 MiB/s, 16 MiB/s), 256 MB took 25-33% longer than hf_xet's own buffer and 128 MB 2.4-2.9 times
as long.
"""

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
        # file at once adds the per-file part, up to the limit (1 GB: six files at once).
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
