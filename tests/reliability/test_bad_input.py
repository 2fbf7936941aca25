"""Malformed requests fail fast with InvalidRequestError, before any lock or network request."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_hfsnapshot import InvalidRequestError, materialize
from pytest_hfsnapshot.core.cache.layout import own_dir
from pytest_hfsnapshot.testing.hub import LocalHub

from .conftest import repo_files

REPO = "org/valid"


def _rejected(hub: LocalHub, repo_id: Any = REPO, **kwargs: Any) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as caught:
        materialize(repo_id, **kwargs)
    assert hub.requests == [], f"{kwargs or repo_id!r} reached the Hub before being rejected"
    assert not own_dir(hub.cache_dir).exists() and list(hub.cache_dir.iterdir()) == []
    return caught.value


@pytest.mark.parametrize(
    "repo_id",
    ["", "org/", "/name", "org//name", "a/b/c", "org/na me", "../x", "org/..", "org/name\n", "o" * 200, 42, None],
)
def test_invalid_repo_ids(local_hub: LocalHub, repo_id: Any) -> None:
    error = _rejected(local_hub, repo_id)
    assert repr(repo_id) in str(error)


@pytest.mark.parametrize(
    "revision",
    ["../x", "", "a..b", "refs/../main", "/abs", "main/", "-rf", "main\n", "a b", "x.lock", "a@{1}", "a\\b", 7],
)
def test_invalid_revisions(local_hub: LocalHub, revision: Any) -> None:
    error = _rejected(local_hub, revision=revision)
    assert REPO in str(error) and repr(revision) in str(error)


@pytest.mark.parametrize("name", ["allow_patterns", "ignore_patterns"])
@pytest.mark.parametrize("value", [[], (), [""], ["  "], [1], ["*.json", None], 5, {"*.json": 1}, b"*.json"])
def test_invalid_patterns(local_hub: LocalHub, name: str, value: Any) -> None:
    error = _rejected(local_hub, **{name: value})
    assert REPO in str(error) and name in str(error)


@pytest.mark.parametrize("repo_type", ["models", "Model", "", "datasets", "spaces ", 1])
def test_unknown_repo_types(local_hub: LocalHub, repo_type: Any) -> None:
    error = _rejected(local_hub, repo_type=repo_type)
    assert REPO in str(error) and repr(repo_type) in str(error)


@pytest.mark.parametrize(
    "option",
    [
        {"verify": "md5"},
        {"verify": ""},
        {"verify": None},
        {"verify": True},
        {"retries": -1},
        {"retries": 1.5},
        {"retries": True},
        {"retries": "3"},
        {"retries": None},
        {"lock_timeout": 0},
        {"lock_timeout": -1},
        {"lock_timeout": math.nan},
        {"lock_timeout": True},
        {"lock_timeout": "5"},
        {"metadata_only": "yes"},
        {"session": "a/b"},
        {"session": ""},
        {"session": "s" * 65},
    ],
    ids=lambda option: "-".join(f"{k}={v!r}" for k, v in option.items()),
)
def test_invalid_options(local_hub: LocalHub, option: dict[str, Any]) -> None:
    error = _rejected(local_hub, **option)
    name, value = next(iter(option.items()))
    assert name in str(error) and repr(value) in str(error)


def test_patterns_matching_nothing_name_the_repo(local_hub: LocalHub) -> None:
    files = repo_files(40)
    commit = local_hub.add_repo(REPO, files)

    with pytest.raises(InvalidRequestError) as caught:
        materialize(REPO, allow_patterns=["*.gguf"], ignore_patterns=["*.json"])

    message = str(caught.value)
    assert REPO in message and commit[:12] in message and "*.gguf" in message
    assert "config.json" in message, "the message should list what the repo has"
    assert local_hub.request_count("*/resolve/*") == 0
    assert caught.value.repo_id == REPO
