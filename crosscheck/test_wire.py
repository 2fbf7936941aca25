"""The HTTP answers under huggingface_hub, request by request, per server.

What huggingface_hub needs (HUB-FACTS.md, "The wire protocol") is asserted for both;
where olah answers differently from the Hub and LocalHub, both answers are asserted.
"""

from __future__ import annotations

import json

import pytest

from .content import DATASET, MODEL, Repo, is_lfs
from .expect import blob_name, etag, fetch
from .servers import TREE_PAGE_SIZE, Target


def resolve_url(target: Target, repo: Repo, revision: str, path: str) -> str:
    prefix = "" if repo.repo_type == "model" else f"{repo.repo_type}s/"
    return f"{target.url}/{prefix}{repo.repo_id}/resolve/{revision}/{path}"


FILES = [
    (MODEL, "config.json"),
    (MODEL, "model.safetensors"),
    (MODEL, "tokenizer/vocab.txt"),
    (DATASET, "data/test.csv"),
]
FILE_IDS = ["regular", "lfs", "nested", "dataset"]


@pytest.mark.parametrize(("repo", "path"), FILES, ids=FILE_IDS)
def test_head_carries_commit_etag_and_size(server: Target, repo: Repo, path: str) -> None:
    label = repo.commits[-1].label if repo is DATASET else "v2"
    data = repo.commit(label).files[path]

    reply = fetch("HEAD", resolve_url(server, repo, "main", path))

    assert reply.status == 200
    assert reply.headers["x-repo-commit"] == server.commit(repo, label)
    assert etag(reply.headers.get("x-linked-etag", reply.headers["etag"])) == blob_name(path, data)
    assert int(reply.headers.get("x-linked-size", reply.headers["content-length"])) == len(data)
    if server.name == "olah":
        # olah puts the LFS sha256 and size in plain ETag/Content-Length, unquoted.
        assert "x-linked-etag" not in reply.headers
        assert "x-linked-size" not in reply.headers
        assert reply.headers["etag"] == blob_name(path, data)
    else:
        # As the Hub: quoted ETags, and X-Linked-* on LFS files only.
        assert reply.headers["etag"] == f'"{blob_name(path, data)}"'
        assert ("x-linked-etag" in reply.headers) == is_lfs(path, data)
        assert reply.headers.get("accept-ranges") == "bytes"


@pytest.mark.parametrize(("repo", "path"), FILES, ids=FILE_IDS)
def test_get_serves_the_bytes(server: Target, repo: Repo, path: str) -> None:
    label = repo.commits[-1].label if repo is DATASET else "v2"
    data = repo.commit(label).files[path]

    reply = fetch("GET", resolve_url(server, repo, "main", path))

    assert reply.status == 200
    assert reply.body == data
    if server.name == "olah":
        # Streamed chunked: huggingface_hub takes the expected size from the HEAD.
        assert "content-length" not in reply.headers
        assert reply.headers.get("transfer-encoding") == "chunked"
    else:
        assert int(reply.headers["content-length"]) == len(data)


def test_range_request(server: Target) -> None:
    data = MODEL.commit("v2").files["model.safetensors"]

    reply = fetch("GET", resolve_url(server, MODEL, "main", "model.safetensors"), {"Range": "bytes=2-9"})

    if server.name == "olah":
        # No Range support: the whole file, 200 (HUB-FACTS.md).
        assert reply.status == 200
        assert reply.body == data
    else:
        assert reply.status == 206
        assert reply.body == data[2:10]
        assert reply.headers["content-range"] == f"bytes 2-9/{len(data)}"


@pytest.mark.parametrize("method", ["HEAD", "GET"])
def test_missing_file(server: Target, method: str) -> None:
    reply = fetch(method, resolve_url(server, MODEL, "main", "nothere.txt"))

    if server.name == "olah":
        # HEAD: 401 RepoNotFound, as for a missing revision. GET: olah's local-mirror
        # path indexes the tree before checking the path, and fails with a bare 500.
        expected = (401, "RepoNotFound") if method == "HEAD" else (500, None)
    else:
        expected = (404, "EntryNotFound")
    assert (reply.status, reply.headers.get("x-error-code")) == expected


@pytest.mark.parametrize("revision", ["nope", "0123456789abcdef0123456789abcdef01234567"], ids=["name", "commit"])
def test_unknown_revision_in_revision_api(server: Target, revision: str) -> None:
    reply = fetch("GET", f"{server.url}/api/models/{MODEL.repo_id}/revision/{revision}")

    if server.name == "olah":
        # A name falls through to the (empty) metadata cache; a 40-hex id reaches GitPython
        # unchecked and fails with a bare 500.
        expected = (401, "RepoNotFound") if revision == "nope" else (500, None)
    else:
        expected = (404, "RevisionNotFound")
    assert (reply.status, reply.headers.get("x-error-code")) == expected


def test_unknown_repo(server: Target) -> None:
    reply = fetch("GET", f"{server.url}/api/models/crosscheck/nothere/revision/main")

    assert (reply.status, reply.headers.get("x-error-code")) == (401, "RepoNotFound")


def test_root_tree_url_and_pagination(server: Target) -> None:
    """huggingface_hub asks for ``/tree/{rev}`` with no path; olah redirects it to ``/tree/{rev}/``.

    LocalHub pages its listings (``Link: rel="next"``, page size set in conftest); olah
    answers every listing in one response.
    """
    url = f"{server.url}/api/models/{MODEL.repo_id}/tree/main?recursive=true&expand=false"

    reply = fetch("GET", url)

    if server.name == "olah":
        assert reply.status == 307
        assert reply.headers["location"] == url.replace("/tree/main?", "/tree/main/?")
        reply = fetch("GET", reply.headers["location"])
        assert reply.status == 200
        assert "link" not in reply.headers
        assert len(json.loads(reply.body)) == 6
    else:
        assert reply.status == 200
        assert reply.headers["link"].endswith('rel="next"')
        assert len(json.loads(reply.body)) == TREE_PAGE_SIZE


def test_tree_folder_entries(server: Target) -> None:
    """The Hub lists folders with size 0; olah reports the git tree object's size."""
    reply = fetch(
        "POST",
        f"{server.url}/api/models/{MODEL.repo_id}/paths-info/main",
        {"Content-Type": "application/x-www-form-urlencoded"},
        b"paths=tokenizer",
    )

    assert reply.status == 200
    [folder] = json.loads(reply.body)
    assert folder["type"] == "directory"
    if server.name == "olah":
        assert folder["size"] > 0
    else:
        assert folder["size"] == 0
