"""Testing your own Hub-loading code with the testing kit: a local Hub, faults, half-written caches.

Run it with ``pytest examples/test_own_loader.py``: no network and no token needed. The
``local_hub`` fixture comes with the plugin; for the test's duration it points huggingface_hub
(this process and its children) at a Hub on 127.0.0.1 and at a fresh, empty cache.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import hf_hub_download, snapshot_download
from huggingface_hub.errors import GatedRepoError

from pytest_hfsnapshot import materialize
from pytest_hfsnapshot.testing import half_written
from pytest_hfsnapshot.testing.hub import LocalHub

FILES = {
    "config.json": json.dumps({"model_type": "acme", "hidden_size": 8}),
    "model.safetensors": b"\x00" * 4096,
}


class ModelUnavailable(Exception):
    """What your loader raises when a repo cannot be read: a message your users can act on."""


# --- the code under test: yours ------------------------------------------------------------------


def load_config(repo_id: str, *, token: str | None = None) -> dict[str, Any]:
    """Read a model's config from the Hub (through the cache), with a clear error for gated repos."""
    try:
        path = hf_hub_download(repo_id, "config.json", token=token)
    except GatedRepoError as error:
        raise ModelUnavailable(f"{repo_id} is gated: accept its conditions and set HF_TOKEN") from error
    config: dict[str, Any] = json.loads(Path(path).read_text())
    return config


def load_weights(repo_id: str) -> bytes:
    """Read a model's weights from a verified snapshot (repaired if the cache was damaged)."""
    return (materialize(repo_id) / "model.safetensors").read_bytes()


# --- the tests -----------------------------------------------------------------------------------


def test_reads_config(local_hub: LocalHub) -> None:
    local_hub.add_repo("acme/tiny", FILES)
    assert load_config("acme/tiny")["hidden_size"] == 8


def test_second_call_uses_the_cache(local_hub: LocalHub) -> None:
    local_hub.add_repo("acme/tiny", FILES)
    load_config("acme/tiny")
    local_hub.reset_counters()
    load_config("acme/tiny")
    # The counters record every request as (method, path, status): no file was fetched again.
    assert local_hub.request_count("*/resolve/*", method="GET") == 0


def test_gated_repo_gives_a_clear_error(local_hub: LocalHub) -> None:
    local_hub.add_repo("acme/gated", FILES, gated=True)
    with pytest.raises(ModelUnavailable, match="acme/gated is gated"):
        load_config("acme/gated")
    # local_hub.token opens gated and private repos.
    assert load_config("acme/gated", token=local_hub.token)["model_type"] == "acme"


def test_survives_a_flaky_hub(local_hub: LocalHub) -> None:
    local_hub.add_repo("acme/tiny", FILES)
    # The fault plan: two 503s, then a body cut after 100 bytes, then a byte flipped in transit.
    local_hub.fail("*/resolve/*/model.safetensors", 503, times=2, method="GET")
    local_hub.cut("*/resolve/*/model.safetensors", after_bytes=100)
    local_hub.corrupt("*/resolve/*/model.safetensors")
    assert load_weights("acme/tiny") == FILES["model.safetensors"]
    assert local_hub.pending_faults() == []  # every fault was met


def test_repairs_a_truncated_cache(local_hub: LocalHub) -> None:
    local_hub.add_repo("acme/tiny", FILES)
    assert local_hub.cache_dir is not None
    snapshot_download("acme/tiny")
    # What a disk that filled up mid-write leaves: huggingface_hub serves the half file as is.
    half_written.truncated_blob(local_hub.cache_dir, "acme/tiny", "model.safetensors")
    assert len(Path(snapshot_download("acme/tiny"), "model.safetensors").read_bytes()) == 2048

    local_hub.reset_counters()
    assert load_weights("acme/tiny") == FILES["model.safetensors"]
    # Only the damaged file was fetched again. A fetch is a GET answered 200: on Xet a reconstruction
    # (then ranged xorb reads, 206), over HTTP the CDN after a 302; the local Hub counts both as the
    # file's resolve path.
    assert local_hub.request_count("*/resolve/*/config.json", method="GET", status=200) == 0
    assert local_hub.request_count("*/resolve/*/model.safetensors", method="GET", status=200) == 1


def test_recovers_from_a_killed_download(local_hub: LocalHub) -> None:
    local_hub.add_repo("acme/tiny", FILES)
    assert local_hub.cache_dir is not None
    snapshot_download("acme/tiny")
    # A CI job killed mid-download: the largest file gone, a stray *.incomplete left behind.
    touched = half_written.interrupted_download(local_hub.cache_dir, "acme/tiny")
    assert any(path.name.endswith(".incomplete") for path in touched)

    assert load_weights("acme/tiny") == FILES["model.safetensors"]
    assert not list(local_hub.cache_dir.rglob("*.incomplete"))
