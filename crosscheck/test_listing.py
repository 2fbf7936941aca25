"""The Hub API answers huggingface_hub reads: tree listings, paths info, revisions, refs."""

from __future__ import annotations

import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import RepositoryNotFoundError
from huggingface_hub.hf_api import RepoFile, RepoFolder

from .content import DATASET, MODEL, Repo
from .expect import TreeEntry, folders, git_tree_oids, tree_entry
from .servers import Target


def _files(entries: list[RepoFile | RepoFolder]) -> dict[str, TreeEntry]:
    return {
        e.path: TreeEntry(e.size, e.blob_id, (e.lfs.sha256, e.lfs.size, e.lfs.pointer_size) if e.lfs else None)
        for e in entries
        if isinstance(e, RepoFile)
    }


def _folders(entries: list[RepoFile | RepoFolder]) -> set[str]:
    return {e.path for e in entries if isinstance(e, RepoFolder)}


@pytest.mark.parametrize(
    ("repo", "revision", "label"),
    [(MODEL, "main", "v2"), (MODEL, "v1.0", "v1"), (MODEL, "dev", "dev"), (DATASET, "main", "v1")],
    ids=["model-main", "model-tag", "model-dev", "dataset"],
)
def test_recursive_tree_sizes_and_lfs(server: Target, repo: Repo, revision: str, label: str) -> None:
    entries = list(HfApi().list_repo_tree(repo.repo_id, recursive=True, revision=revision, repo_type=repo.repo_type))

    files = repo.commit(label).files
    assert _files(entries) == {name: tree_entry(name, data) for name, data in files.items()}
    assert _folders(entries) == folders(files)
    assert len(entries) == len(files) + len(folders(files)), "no entry listed twice"


def test_folder_ids_are_git_tree_ids(server: Target) -> None:
    """Folder ids are content addresses: the same files give the same ids on both servers."""
    files = MODEL.commit("dev").files

    entries = list(HfApi().list_repo_tree(MODEL.repo_id, recursive=True, revision="dev"))

    assert {e.path: e.tree_id for e in entries if isinstance(e, RepoFolder)} == git_tree_oids(files)


def test_tree_by_commit_equals_tree_by_branch(server: Target) -> None:
    api = HfApi()
    by_branch = list(api.list_repo_tree(MODEL.repo_id, recursive=True, revision="dev"))
    by_commit = list(api.list_repo_tree(MODEL.repo_id, recursive=True, revision=server.commit(MODEL, "dev")))

    assert _files(by_commit) == _files(by_branch)


def test_top_level_and_subfolder_listing(server: Target) -> None:
    api = HfApi()
    files = MODEL.commit("v2").files

    top = list(api.list_repo_tree(MODEL.repo_id))
    sub = list(api.list_repo_tree(MODEL.repo_id, path_in_repo="tokenizer"))

    assert set(_files(top)) == {name for name in files if "/" not in name}
    assert _folders(top) == {"tokenizer"}
    assert _files(sub) == {
        name: tree_entry(name, data) for name, data in files.items() if name.startswith("tokenizer/")
    }


def test_paths_info(server: Target) -> None:
    files = MODEL.commit("v2").files

    infos = HfApi().get_paths_info(MODEL.repo_id, ["config.json", "model.safetensors", "tokenizer"])

    assert _files(infos) == {name: tree_entry(name, files[name]) for name in ("config.json", "model.safetensors")}
    assert _folders(infos) == {"tokenizer"}


@pytest.mark.parametrize(("revision", "label"), [("main", "v2"), ("v1.0", "v1"), ("dev", "dev")])
def test_revision_resolves_to_commit(server: Target, revision: str, label: str) -> None:
    info = HfApi().model_info(MODEL.repo_id, revision=revision)

    assert info.sha == server.commit(MODEL, label)
    assert {s.rfilename for s in info.siblings or []} == set(MODEL.commit(label).files)


def test_repo_info_without_revision(server: Target) -> None:
    """olah offline answers ``/api/models/{repo}`` only from its metadata cache, empty for mirrors."""
    api = HfApi()
    if server.name == "olah":
        with pytest.raises(RepositoryNotFoundError):
            api.model_info(MODEL.repo_id)
    else:
        assert api.model_info(MODEL.repo_id).sha == server.commit(MODEL, "v2")


def test_refs(server: Target) -> None:
    refs = HfApi().list_repo_refs(MODEL.repo_id)

    assert {b.name: b.target_commit for b in refs.branches} == {
        "main": server.commit(MODEL, "v2"),
        "dev": server.commit(MODEL, "dev"),
    }
    assert {t.name: t.target_commit for t in refs.tags} == {"v1.0": server.commit(MODEL, "v1")}
