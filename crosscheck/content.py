"""The repositories both servers are loaded with: the same files, commits, branches and tags.

Each repository is a sequence of commits; each commit's tree is exactly its ``files``
(the LocalHub ``add_repo`` model), on ``branch``, optionally tagged. Weight files are LFS
on both servers: LocalHub by its rule, the git mirror as a git-lfs pointer.
"""

from __future__ import annotations

import hashlib
import importlib.util
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pytest_hfsnapshot.testing.hub import is_lfs as local_hub_is_lfs


def is_lfs(path: str, data: bytes) -> bool:
    """Whether a file is LFS. The Hub decides by ``.gitattributes``; LocalHub by its own rule,
    which the git mirror follows so that both servers list the same files as LFS."""
    return local_hub_is_lfs(path, len(data))


def git_blob_sha1(data: bytes) -> str:
    """The git blob id of ``data``: the Hub's oid and ETag for regular files."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def sha256(data: bytes) -> str:
    """The Hub's ETag and ``lfs.oid`` for LFS files."""
    return hashlib.sha256(data).hexdigest()


def lfs_pointer(data: bytes) -> bytes:
    """The git-lfs pointer committed in place of an LFS file."""
    return (f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256(data)}\nsize {len(data)}\n").encode()


@dataclass(frozen=True)
class Commit:
    """One commit: ``label`` names it in tests, since commit ids differ per server."""

    label: str
    files: dict[str, bytes]
    branch: str = "main"
    tag: str | None = None


@dataclass(frozen=True)
class Repo:
    repo_id: str
    repo_type: str
    commits: tuple[Commit, ...] = field(default_factory=tuple)

    def commit(self, label: str) -> Commit:
        return next(c for c in self.commits if c.label == label)


def _weights(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


_MODEL_V1 = {
    "config.json": b'{"model_type": "bert", "hidden_size": 8}\n',
    "README.md": b"---\nlicense: mit\n---\n# tiny model\n",
    "model.safetensors": _weights(1, 24_576),
    "tokenizer/vocab.txt": b"[PAD]\n[UNK]\nhello\nworld\n",
}
_MODEL_V2 = {
    **_MODEL_V1,
    "config.json": b'{"model_type": "bert", "hidden_size": 16}\n',
    "model.safetensors": _weights(2, 40_960),
    "tokenizer/merges.txt": b"h e\nl l\n",
}
_MODEL_DEV = {
    **_MODEL_V2,
    "notes/dev.txt": b"work in progress\n",
    "notes/deep/todo.txt": b"- more layers\n",
    "pytorch_model.bin": _weights(3, 8_192),
}

MODEL = Repo(
    "crosscheck/tiny-model",
    "model",
    (
        Commit("v1", _MODEL_V1, tag="v1.0"),
        Commit("v2", _MODEL_V2),
        Commit("dev", _MODEL_DEV, branch="dev"),
    ),
)

DATASET = Repo(
    "crosscheck/tiny-dataset",
    "dataset",
    (
        Commit(
            "v1",
            {
                "README.md": b"---\nlicense: cc0-1.0\n---\n# tiny dataset\n",
                "data/train.csv": b"text,label\nhello,1\nworld,0\n",
                "data/test.csv": b"text,label\nagain,1\n",
            },
        ),
    ),
)

REPOS = (MODEL, DATASET)


def peer_repos() -> tuple[Repo, ...]:
    """``tests/peers/repos.py``'s repos, each one commit on ``main`` labelled ``main``, in its order.

    Loaded by path (the tests are no package); it needs numpy, safetensors and tokenizers."""
    spec = importlib.util.spec_from_file_location("peer_repos", Path(__file__).parent.parent / "tests/peers/repos.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))  # dataclasses look it up
    if not hasattr(module, "peer_repos"):
        spec.loader.exec_module(module)
    return tuple(Repo(r.repo_id, r.repo_type, (Commit("main", r.files),)) for r in module.peer_repos())
