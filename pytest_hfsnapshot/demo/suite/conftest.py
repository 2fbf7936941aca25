"""The snapshots the demo's tests need, declared once; each fixture is named after its variable.

The demo points huggingface_hub at its local Hub (HF_ENDPOINT, HF_HUB_CACHE) before pytest
starts, so these names resolve there; in your project they are repos on huggingface.co.
"""

from __future__ import annotations

from pytest_hfsnapshot import snapshot_fixture

# A full snapshot: every file of the repo at main, verified before any test sees it.
tiny_model = snapshot_fixture("demo/tiny-model")

# Already in the cache, but the demo cut its weight file in half first: repaired on the way.
cached_model = snapshot_fixture("demo/cached-model")

# Config files only: the weight file never leaves the Hub.
large_model_config = snapshot_fixture("demo/large-model", metadata_only=True)
