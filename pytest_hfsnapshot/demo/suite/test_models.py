"""The demo's test suite: what a project testing its model code looks like with pytest-hfsnapshot.

The first two tests use the same snapshot and run on different xdist workers at the same
time: one downloads, the other waits for it, and the weight file crosses the network once.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from pytest_hfsnapshot import Snapshot


def safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a .safetensors file, checked against the file's size (what a loader does first)."""
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header: dict[str, Any] = json.loads(handle.read(length))
    data_end = max(info["data_offsets"][1] for name, info in header.items() if name != "__metadata__")
    assert path.stat().st_size == 8 + length + data_end, f"{path} is truncated or padded"
    return header


def test_tiny_model_config(tiny_model: Snapshot) -> None:
    config = json.loads((tiny_model / "config.json").read_text())
    assert config["model_type"] == "demo"


def test_tiny_model_weights(tiny_model: Snapshot) -> None:
    header = safetensors_header(tiny_model / "model.safetensors")
    assert header["embeddings.weight"]["shape"] == [256, 512]


def test_tiny_model_tokenizer(tiny_model: Snapshot) -> None:
    assert json.loads((tiny_model / "tokenizer_config.json").read_text())["model_max_length"] == 512
    assert tiny_model.files == ("config.json", "model.safetensors", "tokenizer_config.json")


def test_cached_model_is_whole_again(cached_model: Snapshot) -> None:
    # The cache held half of this file when the run started; a loader would have choked on it.
    header = safetensors_header(cached_model / "model.safetensors")
    assert header["embeddings.weight"]["dtype"] == "F16"


def test_large_model_config_only(large_model_config: Snapshot) -> None:
    assert "model.safetensors" not in large_model_config.files
    assert json.loads((large_model_config / "config.json").read_text())["hidden_size"] == 1024


@pytest.mark.hf_snapshot("demo/gated-model")
def test_gated_model(hf_snapshot: Snapshot) -> None:
    # Never runs here: the repo is gated and the demo has no token, so the test is skipped.
    assert (hf_snapshot / "config.json").is_file()


@pytest.mark.hf_requires_token
def test_needs_a_token() -> None:
    # Skipped whenever no Hub token is configured (HF_TOKEN or a stored login).
    raise AssertionError("the demo runs without a token")
