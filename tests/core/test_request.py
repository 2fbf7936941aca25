"""The request module's rules: commit ids, the repo-type URL prefix, the cache folder, the declaration keywords."""

from __future__ import annotations

import dataclasses

import pytest
from huggingface_hub.file_download import repo_folder_name as client_folder_name

from pytest_hfsnapshot import InvalidRequestError
from pytest_hfsnapshot.core.cache.layout import repo_folder_name
from pytest_hfsnapshot.request import (
    KEYWORDS,
    SnapshotRequest,
    is_commit,
    keywords_signature,
    repo_path,
    repo_type_of_prefix,
)

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


# --- the keywords of every declaration form, named once ---------------------------------------


def test_the_keywords_are_the_requests_fields_with_their_defaults() -> None:
    assert KEYWORDS == ("revision", "allow_patterns", "ignore_patterns", "repo_type", "metadata_only", "private")
    assert {f.name for f in dataclasses.fields(SnapshotRequest)} == {"repo_id", *KEYWORDS}
    assert SnapshotRequest.build("org/x") == SnapshotRequest("org/x")
    assert keywords_signature() == (
        "revision='main', allow_patterns=None, ignore_patterns=None, repo_type='model', "
        "metadata_only=False, private=False"
    )


def test_every_declaration_form_takes_exactly_the_keywords() -> None:
    from pytest_hfsnapshot.core.engine.specs import SPEC_KEYS, parse_spec
    from pytest_hfsnapshot.plugin.declarations import MARKERS

    assert ("repo_id", *KEYWORDS) == SPEC_KEYS
    assert MARKERS[0].startswith(f"hf_snapshot(repo_id, {keywords_signature()}): ")
    spec = parse_spec('{"repo_id": "org/x", "revision": "v1", "metadata_only": true}')
    assert spec == SnapshotRequest.build("org/x", revision="v1", metadata_only=True)
    with pytest.raises(InvalidRequestError, match=r"unknown key\(s\) revison; use repo_id, revision, allow_patterns"):
        parse_spec('{"repo_id": "org/x", "revison": "v1"}')


def test_an_unknown_keyword_names_the_form_and_the_keywords() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        SnapshotRequest.from_keywords("org/x", {"revison": "v1", "privat": True}, form="hf_snapshot")
    assert str(caught.value) == (
        "unknown argument(s) privat, revison; hf_snapshot takes the repo id and revision, allow_patterns, "
        "ignore_patterns, repo_type, metadata_only, private"
    )
    with pytest.raises(InvalidRequestError, match=r"SnapshotRequest\.build takes the repo id"):
        SnapshotRequest.build("org/x", **{"revison": "v1"})  # type: ignore[arg-type]


def test_none_means_the_default_for_revision_and_repo_type() -> None:
    assert SnapshotRequest.from_keywords("org/x", {"revision": None, "repo_type": None}, form="f") == SnapshotRequest(
        "org/x"
    )
