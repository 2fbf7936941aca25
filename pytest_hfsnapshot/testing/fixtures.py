"""pytest fixtures of the testing kit, registered by the plugin (no import needed in conftest)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .half_written import HalfWritten
    from .hub import LocalHub

# The kit is imported when a fixture is used, not when pytest starts: a suite that never asks
# for local_hub does not pay for an HTTP server module at start-up.


@pytest.fixture
def local_hub(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalHub]:
    """A fresh local Hub for this test, with huggingface_hub pointed at it and at an empty cache.

    ``local_hub.cache_dir`` is that cache (absolute, resolved); ``local_hub.url`` and
    ``local_hub.token`` are the server's. Offline mode and telemetry are off and any ambient
    token is hidden for the test's duration, in this process and its children. LFS files are
    Xet-backed when hf_xet is installed, as on huggingface.co; ``@pytest.mark.local_hub(xet=False)``
    serves them by plain HTTP only (the marker's keywords are ``LocalHub``'s).
    """
    from .hub import LocalHub, client_patches

    marker = request.node.get_closest_marker("local_hub")
    if marker is not None and marker.args:
        raise pytest.UsageError(f"@pytest.mark.local_hub takes keywords only (e.g. xet=False), got {marker.args}")
    cache_dir = (tmp_path / "hf-cache").resolve()
    home_dir = (tmp_path / "hf-home").resolve()
    cache_dir.mkdir()
    home_dir.mkdir()
    options = marker.kwargs if marker is not None else {}
    # Through monkeypatch so a test's own patches of the same names unwind in the right order.
    with LocalHub(**options) as hub, client_patches(hub.url, cache_dir, home_dir).applied(monkeypatch):
        hub.cache_dir = cache_dir
        yield hub


@pytest.fixture
def half_written(local_hub: LocalHub) -> HalfWritten:
    """The half-written cache states of :mod:`pytest_hfsnapshot.testing.half_written`, on ``local_hub.cache_dir``.

    ``half_written.truncated_blob("org/tiny", "model.safetensors")`` damages the repo as cached
    by an earlier ``snapshot_download`` and returns the paths it touched.
    """
    from .half_written import HalfWritten

    assert local_hub.cache_dir is not None
    return HalfWritten(local_hub.cache_dir)
