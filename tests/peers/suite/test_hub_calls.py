"""diffusers' and datasets' way: huggingface_hub called inline, weights read with safetensors."""

from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import EntryNotFoundError
from safetensors import safe_open
from transformers.utils import cached_file


def test_weights_read_with_safetensors():
    path = hf_hub_download("peers/tiny-bert", "model.safetensors")
    with safe_open(path, framework="numpy") as weights:
        tensor = weights.get_tensor("embeddings.weight")
    expected = np.arange(128 * 2048, dtype=np.float32).reshape(128, 2048) / 7.0
    assert np.array_equal(tensor, expected)


def test_dataset_snapshot():
    folder = Path(snapshot_download("peers/tiny-corpus", repo_type="dataset"))
    assert (folder / "data" / "train.csv").read_text().splitlines() == ["text,label", "hello world,1", "the model,0"]
    assert (folder / "data" / "test.csv").is_file()


def test_model_card_and_info():
    api = HfApi()
    assert api.model_info("peers/tiny-bert").id == "peers/tiny-bert"
    assert api.file_exists("peers/tiny-bert", "README.md")


def test_optional_file_is_absent():
    # transformers asks for optional files and takes EntryNotFoundError as "absent".
    assert cached_file("peers/tiny-word", "generation_config.json", _raise_exceptions_for_missing_entries=False) is None
    with pytest.raises(EntryNotFoundError):
        hf_hub_download("peers/tiny-word", "preprocessor_config.json")
