"""Tests using the snapshots of conftest.py, the hf_snapshot marker and the hf_snapshots factory."""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_hfsnapshot import Snapshot
from pytest_hfsnapshot.plugin.hooks import SnapshotFactory


def test_snapshot_is_a_path(tiny_bert: Snapshot) -> None:
    # os.fspath(), str() and "/" work: hand it to from_pretrained() or open files in it.
    assert os.path.isdir(tiny_bert)
    assert (tiny_bert / "config.json").is_file()
    assert len(tiny_bert.commit) == 40  # the commit "main" pointed at when it was materialized
    assert tiny_bert.source in ("cache", "download", "repair", "layer")


def test_own_fixture(tiny_bert_config: dict[str, Any]) -> None:
    assert tiny_bert_config["model_type"] == "bert"


def test_selected_files(tiny_gpt2: Snapshot) -> None:
    assert all(name.endswith((".json", ".txt", ".safetensors")) for name in tiny_gpt2.files)


def test_metadata_only(llama_config: Snapshot) -> None:
    assert "config.json" in llama_config.files
    assert not any(name.endswith((".safetensors", ".bin")) for name in llama_config.files)


def test_dataset_card(imdb_card: Snapshot) -> None:
    assert imdb_card.repo_type == "dataset"
    assert (imdb_card / "README.md").read_text(encoding="utf-8")


def test_with_transformers(tiny_bert: Snapshot) -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.from_pretrained(tiny_bert)  # a Snapshot is a local folder
    assert config.model_type == "bert"


# The marker form: no conftest entry; the hf_snapshot fixture is the closest marker's snapshot.
@pytest.mark.hf_snapshot("hf-internal-testing/tiny-random-gpt2", allow_patterns=["config.json"])
def test_marker(hf_snapshot: Snapshot) -> None:
    assert hf_snapshot.files == ("config.json",)


# On a class, the marker covers every test in it (one snapshot for all of them).
@pytest.mark.hf_snapshot("hf-internal-testing/tiny-random-bert", allow_patterns=["*.json", "*.txt"])
class TestTokenizerFiles:
    def test_vocab(self, hf_snapshot: Snapshot) -> None:
        assert (hf_snapshot / "vocab.txt").is_file()

    def test_config(self, hf_snapshot: Snapshot) -> None:
        assert (hf_snapshot / "config.json").is_file()


# The factory form: for repos chosen at run time (parametrized or computed).
@pytest.mark.parametrize("repo_id", ["hf-internal-testing/tiny-random-bert", "hf-internal-testing/tiny-random-gpt2"])
def test_factory(hf_snapshots: SnapshotFactory, repo_id: str) -> None:
    snapshot = hf_snapshots(repo_id, allow_patterns="config.json")
    assert snapshot.repo_id == repo_id
    assert (snapshot / "config.json").is_file()


# A gated repo: skipped when no token is set (HF_TOKEN, or `hf auth login`). With a token that
# was not granted access, the snapshot itself is refused and the test is skipped with the reason
# (--hf-on-auth-error=fail turns that into a failure, for jobs that must have access).
@pytest.mark.hf_requires_token
@pytest.mark.hf_snapshot("meta-llama/Llama-3.2-1B", allow_patterns=["config.json"])
def test_gated(hf_snapshot: Snapshot) -> None:
    assert (hf_snapshot / "config.json").is_file()
