"""The request module's naming rules: commit ids, the repo-type URL prefix, the cache folder."""

from __future__ import annotations

import pytest
from huggingface_hub.file_download import repo_folder_name as client_folder_name

from pytest_hfsnapshot.core.layout import repo_folder_name
from pytest_hfsnapshot.request import SnapshotRequest, is_commit, repo_path, repo_type_of_prefix

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("text", "expected"),
    [(COMMIT, True), (COMMIT.upper(), False), (COMMIT[:-1], False), (COMMIT + "\n", False), ("main", False)],
)
def test_a_commit_id_is_exactly_forty_lowercase_hex_digits(text: str, expected: bool) -> None:
    assert is_commit(text) is expected
    assert SnapshotRequest("org/x", revision=text).pinned is expected


@pytest.mark.parametrize(
    ("repo_type", "path", "folder"),
    [
        ("model", "org/x", "models--org--x"),
        ("dataset", "datasets/org/x", "datasets--org--x"),
        ("space", "spaces/org/x", "spaces--org--x"),
    ],
)
def test_each_repo_type_is_named_as_the_hub_and_the_client_name_it(repo_type: str, path: str, folder: str) -> None:
    assert repo_path("org/x", repo_type) == path
    assert SnapshotRequest("org/x", repo_type=repo_type).label == f"{path}@main"
    assert repo_folder_name("org/x", repo_type) == folder == client_folder_name(repo_id="org/x", repo_type=repo_type)
    prefix = path.partition("/")[0]
    assert repo_type_of_prefix(prefix) == (None if repo_type == "model" else repo_type)


def test_only_our_repo_types_have_a_prefix() -> None:
    assert [repo_type_of_prefix(p) for p in ("models", "kernels", "dataset", "")] == [None] * 4
