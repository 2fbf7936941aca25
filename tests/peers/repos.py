"""The repos the peer suite loads, small but real: transformers, tokenizers and safetensors accept them.

Usable without pytest: ``fill(hub)`` on any started ``LocalHub``. No two LFS files share their bytes,
so the bytes served for each file are unambiguous, through Xet's shared blob store or not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from safetensors.numpy import save
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from pytest_hfsnapshot.testing.hub import LocalHub

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "the", "a", "model", "##s", "test"]
#: The weight the suite reads with safetensors: 1 MiB of float32, LFS (and Xet) on every Hub.
EMBEDDINGS_SHAPE = (128, 2048)
#: The repo each peer style loads, as the suite names them.
BERT, WORD, PEFT, SERVER = "peers/tiny-bert", "peers/tiny-word", "peers/tiny-peft", "peers/tiny-server"
#: A canonical id with no organization, as ``bert-base-uncased``.
BARE = "tiny-bare"
CORPUS = "peers/tiny-corpus"


@dataclass(frozen=True)
class PeerRepo:
    repo_id: str
    repo_type: str
    files: dict[str, bytes]

    @property
    def folder(self) -> str:
        """The repo as the summary and ``--hf-pins`` messages write it (``datasets/org/name``)."""
        return f"datasets/{self.repo_id}" if self.repo_type == "dataset" else self.repo_id


def embeddings(scale: float) -> np.ndarray:
    """The tensor ``model.safetensors`` holds; the suite compares what it reads with this."""
    return np.arange(EMBEDDINGS_SHAPE[0] * EMBEDDINGS_SHAPE[1], dtype=np.float32).reshape(EMBEDDINGS_SHAPE) / scale


def _bert_config(**extra: object) -> bytes:
    config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": len(VOCAB),
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 37,
        "max_position_embeddings": 64,
        **extra,
    }
    return json.dumps(config, indent=2).encode()


def _wordpiece(name: str) -> dict[str, bytes]:
    """A BERT tokenizer as BERT checkpoints ship it: ``vocab.txt`` and ``tokenizer_config.json``."""
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 64, "name": name}
    return {"vocab.txt": ("\n".join(VOCAB) + "\n").encode(), "tokenizer_config.json": json.dumps(config).encode()}


def _fast_tokenizer(name: str) -> dict[str, bytes]:
    """A ``tokenizer.json`` made with the tokenizers library, as most recent checkpoints ship it."""
    tokenizer = Tokenizer(models.WordLevel({word: i for i, word in enumerate(VOCAB)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "pad_token": "[PAD]", "name": name}
    return {"tokenizer.json": tokenizer.to_str().encode(), "tokenizer_config.json": json.dumps(config).encode()}


def peer_repos() -> list[PeerRepo]:
    """Every repo, in the order ``fill`` commits them (the local Hub's commit ids follow that order)."""
    return [
        PeerRepo(
            BERT,
            "model",
            {
                "config.json": _bert_config(),
                **_wordpiece(BERT),
                "model.safetensors": save({"embeddings.weight": embeddings(7.0)}),
                "README.md": b"---\nlicense: mit\n---\n# tiny-bert\n",
                # Never loaded by the suite: a prefetch of what it recorded must not fetch it.
                "tf_model.h5": b"\x89HDF" * 16384,
            },
        ),
        PeerRepo(
            WORD,
            "model",
            {
                "config.json": _bert_config(name=WORD),
                **_fast_tokenizer(WORD),
                "model.safetensors": save({"embeddings.weight": embeddings(5.0)}),
            },
        ),
        PeerRepo(
            PEFT,
            "model",
            {
                "config.json": _bert_config(name=PEFT),
                **_wordpiece(PEFT),
                "model.safetensors": save({"embeddings.weight": embeddings(11.0)}),
            },
        ),
        PeerRepo(
            SERVER,
            "model",
            {
                "config.json": _bert_config(name=SERVER),
                **_fast_tokenizer(SERVER),
                "model.safetensors": save({"embeddings.weight": embeddings(3.0)[:8]}),
            },
        ),
        PeerRepo(BARE, "model", {"config.json": _bert_config(name=BARE)}),
        PeerRepo(
            CORPUS,
            "dataset",
            {
                "README.md": b"---\nlicense: mit\n---\n# tiny-corpus\n",
                "data/train.csv": b"text,label\nhello world,1\nthe model,0\n",
                "data/test.csv": b"text,label\na test,1\n",
            },
        ),
    ]


def fill(hub: LocalHub) -> dict[str, str]:
    """Commit every peer repo on ``hub``'s ``main``; their commits by folder (``datasets/org/name``)."""
    return {repo.folder: hub.add_repo(repo.repo_id, repo.files, repo_type=repo.repo_type) for repo in peer_repos()}


def file_requests(hub: LocalHub) -> list[tuple[str, str, int, int, tuple[str, ...]]]:
    """(method, path, status, body bytes, files) of every request for a repo file's bytes or metadata.

    ``files`` are the ``/{repo}/resolve/{commit}/{path}`` forms the request was for: its own path on
    the Hub, its aliases on the CDN and the CAS.
    """
    found = []
    for record in hub.counters().records:
        names = tuple(p for p in (record.path, *record.aliases) if "/resolve/" in p)
        if names:
            found.append((record.method, record.path, record.status, record.body_bytes, names))
    return found


def file_bytes_ratio(hub: LocalHub, commits: Mapping[str, str]) -> float:
    """Body bytes that carried repo files (cut ones included) over the sizes of the distinct files
    fetched; ``commits`` by folder, as :func:`fill` returns them."""
    sizes = {
        f"/{repo.folder}/resolve/{commits[repo.folder]}/{path}": len(content)
        for repo in peer_repos()
        for path, content in repo.files.items()
    }
    sent = 0
    distinct: set[str] = set()
    for method, path, status, body, names in file_requests(hub):
        if method == "GET" and status in (200, 206) and "/reconstructions/" not in path:
            sent += body
            distinct.update(names)
    if not distinct:
        raise AssertionError("no file bytes were served")
    return sent / sum(sizes[name] for name in distinct)
