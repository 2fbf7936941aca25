"""Point huggingface_hub in this process (and its children) at any Hub URL and cache.

``LocalHub.configure_client`` only knows its own URL; this applies the very same patches, the same
way (``pytest_hfsnapshot.testing.hub.client_patches(...).applied()``), for a server that is not a
LocalHub, so both servers are reached through an identically configured client.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_hfsnapshot.testing.hub import client_patches


@contextmanager
def pointed_at(url: str, cache_dir: Path) -> Iterator[Path]:
    """For the block: requests go to ``url``, files to ``cache_dir``, online, no telemetry, no token."""
    cache = cache_dir.resolve()
    home = cache.parent / "hf-home"
    home.mkdir(exist_ok=True)
    with client_patches(url, cache, home).applied():
        yield cache
