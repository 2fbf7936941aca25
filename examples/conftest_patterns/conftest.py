"""conftest.py patterns for pytest-hfsnapshot: copy the ones you need into your own conftest.py.

Every form below is session-scoped and xdist-safe: however many workers ask for the same
snapshot, it is downloaded once per cache, verified, and handed out as a ``Snapshot`` (a path).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_hfsnapshot import Snapshot, snapshot_fixture

# The whole repo at ``main``: every file present and of the size the Hub lists, at least one
# metadata file (config.json, tokenizer_config.json, ...) in it. The fixture is named after the
# variable: tests ask for ``tiny_bert``.
tiny_bert = snapshot_fixture("hf-internal-testing/tiny-random-bert")

# Only some files: what your code loads, nothing more.
tiny_gpt2 = snapshot_fixture(
    "hf-internal-testing/tiny-random-gpt2",
    allow_patterns=["*.json", "*.txt", "*.safetensors"],
)

# Everything but weight files (*.safetensors, *.bin, *.pt, *.gguf, *.onnx, ...): configs and
# tokenizers of a large model, for tests that never run it.
llama_config = snapshot_fixture("hf-internal-testing/tiny-random-LlamaForCausalLM", metadata_only=True)

# A dataset repo, one file of it. Pin revision= to a tag or a 40-hex commit to make the run
# reproducible: a pinned, cached snapshot costs no request at all on later runs.
imdb_card = snapshot_fixture("stanfordnlp/imdb", repo_type="dataset", allow_patterns="README.md")


# A fixture of your own built on a snapshot: session-scoped too, so it is read once.
@pytest.fixture(scope="session")
def tiny_bert_config(tiny_bert: Snapshot) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((tiny_bert / "config.json").read_text())
    return config
