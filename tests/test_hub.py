"""The local Hub double, driven by the real huggingface_hub client (1.x and 2.x)."""

from __future__ import annotations

import hashlib
import importlib
import os
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import (
    DatasetInfo,
    HfApi,
    ModelInfo,
    RepoFile,
    SpaceInfo,
    constants,
    get_hf_file_metadata,
    get_session,
    hf_hub_download,
    hf_hub_url,
    snapshot_download,
)
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import _http

from pytest_hfsnapshot.testing.hub import LocalHub, git_blob_sha1

# The HTTP library of the installed huggingface_hub line: httpx (1.x) or httpx2 (2.x).
HTTP = importlib.import_module("httpx2" if hasattr(_http, "httpx2") else "httpx")

CONFIG = '{"model_type": "bert"}'
WEIGHTS = bytes(range(256)) * 12  # 3072 bytes, LFS by suffix
FILES: dict[str, bytes | str] = {
    "config.json": CONFIG,
    "model.safetensors": WEIGHTS,
    "tokenizer/vocab.txt": "a\nb\nc\n",
    "tokenizer/deep/merges.txt": "a b\n",
    "README.md": "# tiny\n",
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def blob_dir(cache_dir: Path, repo_id: str, repo_type: str = "model") -> Path:
    return cache_dir / f"{repo_type}s--{repo_id.replace('/', '--')}" / "blobs"


@pytest.fixture
def client_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the client's backoff sleeps instead of sleeping, so retry tests stay fast.

    Only huggingface_hub's own modules see the stand-in; the server keeps real time.
    """
    import huggingface_hub.file_download as file_download

    sleeps: list[float] = []
    for module in (_http, file_download):
        stand_in = types.SimpleNamespace(**{n: getattr(time, n) for n in dir(time) if not n.startswith("_")})
        stand_in.sleep = sleeps.append
        monkeypatch.setattr(module, "time", stand_in)
    return sleeps


@pytest.fixture
def hub(local_hub: LocalHub) -> LocalHub:
    local_hub.add_repo("org/tiny", FILES)
    return local_hub


# -- the fixture and configure_client ----------------------------------------------------------


def test_fixture_points_the_client_at_the_hub_and_an_empty_cache(local_hub: LocalHub) -> None:
    assert local_hub.cache_dir is not None
    assert local_hub.cache_dir.is_absolute()
    assert local_hub.cache_dir == local_hub.cache_dir.resolve()
    assert list(local_hub.cache_dir.iterdir()) == []
    assert local_hub.url.startswith("http://127.0.0.1:")
    assert local_hub.url == constants.ENDPOINT
    assert str(local_hub.cache_dir) == constants.HF_HUB_CACHE
    assert constants.HF_HUB_OFFLINE is False
    assert constants.HF_HUB_DISABLE_TELEMETRY is True
    assert huggingface_hub.get_token() is None
    assert os.environ["HF_ENDPOINT"] == local_hub.url
    assert os.environ["HF_HUB_CACHE"] == str(local_hub.cache_dir)
    assert os.environ["HF_HUB_OFFLINE"] == "0"
    assert "HF_TOKEN" not in os.environ


def test_bare_snapshot_download_goes_to_the_hub(hub: LocalHub) -> None:
    path = Path(snapshot_download("org/tiny"))

    assert hub.cache_dir is not None
    assert path.is_relative_to(hub.cache_dir)
    assert (path / "config.json").read_text() == CONFIG
    assert hub.request_count("/api/models/org/tiny/revision/main") == 1


def test_ambient_token_is_hidden_then_usable(local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch) -> None:
    local_hub.add_repo("org/secret", {"config.json": CONFIG}, private=True)
    with pytest.raises(RepositoryNotFoundError):
        snapshot_download("org/secret")

    monkeypatch.setenv("HF_TOKEN", local_hub.token)
    assert Path(snapshot_download("org/secret"), "config.json").read_text() == CONFIG


def test_configure_client_works_without_pytest_and_restores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_ambient")
    endpoint_before, cache_before = constants.ENDPOINT, constants.HF_HUB_CACHE
    ports = set()
    for round_ in range(2):  # a new server on a new port each time: no stale client session
        with LocalHub() as hub, hub.configure_client(tmp_path / f"cache{round_}") as cache:
            hub.add_repo("org/tiny", {"config.json": CONFIG})
            ports.add(hub.url)
            assert huggingface_hub.get_token() is None
            assert Path(snapshot_download("org/tiny"), "config.json").is_relative_to(cache)
            assert hub.request_count("*/resolve/*") == 2
    assert len(ports) == 2
    assert endpoint_before == constants.ENDPOINT
    assert cache_before == constants.HF_HUB_CACHE
    assert os.environ["HF_TOKEN"] == "hf_ambient"
    assert "HF_ENDPOINT" not in os.environ or os.environ["HF_ENDPOINT"] != hub.url


def test_child_processes_reach_the_hub_through_the_environment(hub: LocalHub) -> None:
    code = "import huggingface_hub as h; print(h.snapshot_download('org/tiny'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)

    assert hub.cache_dir is not None
    assert Path(done.stdout.strip()).is_relative_to(hub.cache_dir)
    assert hub.request_count("*/resolve/*/config.json", method="GET") == 1


def test_telemetry_route_is_absent(local_hub: LocalHub) -> None:
    assert get_session().get(f"{local_hub.url}/api/agent-harnesses").status_code == 404


def test_whoami(local_hub: LocalHub) -> None:
    assert HfApi().whoami(token=local_hub.token)["name"] == "local-hub-user"
    with pytest.raises(HfHubHTTPError):
        HfApi().whoami(token="hf_wrong")


# -- repos, revisions, listings ------------------------------------------------------------------


@pytest.mark.parametrize(("repo_type", "prefix"), [("model", ""), ("dataset", "datasets/"), ("space", "spaces/")])
def test_snapshot_and_file_download_for_each_repo_type(local_hub: LocalHub, repo_type: str, prefix: str) -> None:
    commit = local_hub.add_repo("org/thing", FILES, repo_type=repo_type)

    path = Path(snapshot_download("org/thing", repo_type=repo_type))
    single = hf_hub_download("org/thing", "config.json", repo_type=repo_type)

    assert path.name == commit
    assert sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()) == sorted(FILES)
    assert (path / "model.safetensors").read_bytes() == WEIGHTS
    assert Path(single).read_text() == CONFIG
    plural = f"{repo_type}s"
    assert local_hub.request_count(f"/api/{plural}/org/thing/revision/main") == 1
    assert local_hub.request_count(f"/{prefix}org/thing/resolve/{commit}/*", method="GET") == len(FILES)
    info = HfApi().repo_info("org/thing", repo_type=repo_type)
    assert isinstance(info, (ModelInfo, DatasetInfo, SpaceInfo))
    assert info.sha == commit
    assert sorted(s.rfilename for s in info.siblings or []) == sorted(FILES)


def test_info_endpoints(local_hub: LocalHub) -> None:
    model = local_hub.add_repo("org/m", FILES)
    dataset = local_hub.add_repo("org/d", {"README.md": "# d"}, repo_type="dataset", gated=True)
    space = local_hub.add_repo("org/s", {"app.py": "print()"}, repo_type="space")
    api = HfApi()

    info = api.model_info("org/m", files_metadata=True)
    assert (info.id, info.sha, info.private, info.gated) == ("org/m", model, False, False)
    siblings = {s.rfilename: s for s in info.siblings or []}
    assert siblings["model.safetensors"].lfs is not None
    assert siblings["model.safetensors"].lfs.sha256 == sha256(WEIGHTS)
    assert siblings["config.json"].lfs is None
    assert siblings["config.json"].blob_id == git_blob_sha1(CONFIG.encode())
    assert (api.dataset_info("org/d").sha, api.dataset_info("org/d").gated) == (dataset, "manual")
    assert api.space_info("org/s").sha == space


def test_branches_tags_and_several_commits(local_hub: LocalHub) -> None:
    first = local_hub.add_repo("org/r", {"config.json": "1"}, tag="v1")
    second = local_hub.add_repo("org/r", {"config.json": "2", "extra.txt": "e"})
    dev = local_hub.add_repo("org/r", {"config.json": "dev"}, branch="dev")
    pr = local_hub.add_repo("org/r", {"config.json": "pr"}, branch="refs/pr/1")

    assert len({first, second, dev, pr}) == 4
    assert all(len(c) == 40 and int(c, 16) >= 0 for c in (first, second, dev, pr))
    expected = {"main": (second, "2"), "v1": (first, "1"), first: (first, "1"), "dev": (dev, "dev")}
    for revision, (commit, content) in expected.items():
        path = Path(snapshot_download("org/r", revision=revision))
        assert path.name == commit
        assert (path / "config.json").read_text() == content
    # Each commit's tree is exactly its files: the second commit added a file, the tag's did not.
    assert not (Path(snapshot_download("org/r", revision="v1")) / "extra.txt").exists()
    # A 40-hex commit needs no revision lookup.
    assert local_hub.request_count(f"*/revision/{first}") == 0

    assert Path(hf_hub_download("org/r", "config.json", revision="refs/pr/1")).read_text() == "pr"
    assert local_hub.request_count("/org/r/resolve/refs/pr/1/config.json", method="HEAD") == 1
    api = HfApi()
    assert api.model_info("org/r", revision="refs/pr/1").sha == pr
    assert api.revision_exists("org/r", "v1")
    assert not api.revision_exists("org/r", "v2")
    refs = api.list_repo_refs("org/r", include_pull_requests=True)
    assert {b.name: b.target_commit for b in refs.branches} == {"main": second, "dev": dev}
    assert {t.name: t.target_commit for t in refs.tags} == {"v1": first}
    assert [p.name for p in refs.pull_requests or []] == ["refs/pr/1"]


def test_tree_listing_is_paginated(hub: LocalHub) -> None:
    hub.tree_page_size = 2
    entries = list(HfApi().list_repo_tree("org/tiny", recursive=True))

    # 5 files and the folders tokenizer/ and tokenizer/deep/: 7 entries, 4 pages.
    assert len(entries) == 7
    assert hub.request_count("/api/models/org/tiny/tree/*") == 4
    top = [e.path for e in HfApi().list_repo_tree("org/tiny")]
    assert sorted(top) == ["README.md", "config.json", "model.safetensors", "tokenizer"]
    inner = [e.path for e in HfApi().list_repo_tree("org/tiny", path_in_repo="tokenizer", recursive=True)]
    assert sorted(inner) == ["tokenizer/deep", "tokenizer/deep/merges.txt", "tokenizer/vocab.txt"]
    with pytest.raises(RemoteEntryNotFoundError):
        list(HfApi().list_repo_tree("org/tiny", path_in_repo="nope"))


def test_snapshot_download_follows_tree_pages(hub: LocalHub) -> None:
    hub.tree_page_size = 3
    path = Path(snapshot_download("org/tiny"))

    assert sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()) == sorted(FILES)
    assert hub.request_count("/api/models/org/tiny/tree/*") == 3


def test_paths_info_and_file_exists(hub: LocalHub) -> None:
    api = HfApi()
    infos = {i.path: i for i in api.get_paths_info("org/tiny", ["config.json", "tokenizer", "missing.txt"])}

    assert sorted(infos) == ["config.json", "tokenizer"]
    assert api.file_exists("org/tiny", "config.json")
    assert not api.file_exists("org/tiny", "missing.txt")
    assert not api.file_exists("org/other", "config.json")


def test_lfs_and_git_etags_name_the_cached_blobs(local_hub: LocalHub) -> None:
    big_text = b"0123456789abcdef" * (1024 * 64)  # exactly 1 MiB: LFS by size
    files = {"config.json": CONFIG.encode(), "model.safetensors": WEIGHTS, "big.txt": big_text}
    commit = local_hub.add_repo("org/lfs", files)

    tree = {f.path: f for f in HfApi().list_repo_tree("org/lfs") if isinstance(f, RepoFile)}
    for name, data in files.items():
        meta = get_hf_file_metadata(hf_hub_url("org/lfs", name))
        assert (meta.commit_hash, meta.size) == (commit, len(data))
        entry = tree[name]
        if name == "config.json":
            assert meta.etag == entry.blob_id == git_blob_sha1(data)
            assert entry.lfs is None
        else:
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256(data)}\nsize {len(data)}\n"
            assert meta.etag == sha256(data)
            assert entry.lfs is not None
            assert (entry.lfs.sha256, entry.lfs.size, entry.lfs.pointer_size) == (
                sha256(data),
                len(data),
                len(pointer),
            )
            assert entry.blob_id == git_blob_sha1(pointer.encode())
        assert entry.size == len(data)

    snapshot_download("org/lfs")
    assert local_hub.cache_dir is not None
    blobs = sorted(p.name for p in blob_dir(local_hub.cache_dir, "org/lfs").iterdir())
    assert blobs == sorted([git_blob_sha1(CONFIG.encode()), sha256(WEIGHTS), sha256(big_text)])


def test_file_headers_never_advertise_xet_or_redirect(hub: LocalHub) -> None:
    lfs = get_session().head(hf_hub_url("org/tiny", "model.safetensors"))
    small = get_session().head(hf_hub_url("org/tiny", "config.json"))

    assert lfs.status_code == small.status_code == 200
    assert lfs.headers["X-Linked-Etag"] == f'"{sha256(WEIGHTS)}"'
    assert lfs.headers["X-Linked-Size"] == str(len(WEIGHTS))
    assert "X-Linked-Etag" not in small.headers
    assert small.headers["ETag"] == f'"{git_blob_sha1(CONFIG.encode())}"'
    for response in (lfs, small):
        assert "X-Xet-Hash" not in response.headers
        assert len(response.headers["X-Repo-Commit"]) == 40
    assert hub.bytes_served.get("/org/tiny/resolve/main/config.json", 0) == 0


def test_range_requests(hub: LocalHub) -> None:
    url = hf_hub_url("org/tiny", "model.safetensors")
    session = get_session()

    middle = session.get(url, headers={"Range": "bytes=10-19"})
    tail = session.get(url, headers={"Range": "bytes=-5"})
    rest = session.get(url, headers={"Range": "bytes=3000-"})
    beyond = session.get(url, headers={"Range": f"bytes={len(WEIGHTS)}-"})

    assert (middle.status_code, middle.content) == (206, WEIGHTS[10:20])
    assert middle.headers["Content-Range"] == f"bytes 10-19/{len(WEIGHTS)}"
    assert (tail.status_code, tail.content) == (206, WEIGHTS[-5:])
    assert rest.content == WEIGHTS[3000:]
    assert beyond.status_code == 416
    assert beyond.headers["Content-Range"] == f"bytes */{len(WEIGHTS)}"
    path = "/org/tiny/resolve/main/model.safetensors"
    assert hub.bytes_served[path] == 10 + 5 + (len(WEIGHTS) - 3000) + len(beyond.content)


# -- access control and not-found errors -----------------------------------------------------


def test_private_repo_is_not_found_on_every_endpoint_without_the_token(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/private", FILES, private=True)
    api = HfApi()

    with pytest.raises(RepositoryNotFoundError) as raised:
        snapshot_download("org/private")
    assert not isinstance(raised.value, GatedRepoError)
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("org/private", "config.json")
    with pytest.raises(RepositoryNotFoundError):
        list(api.list_repo_tree("org/private"))
    with pytest.raises(RepositoryNotFoundError):
        api.get_paths_info("org/private", ["config.json"])
    raw = get_session().get(hf_hub_url("org/private", "config.json"))
    assert (raw.status_code, raw.headers["X-Error-Code"]) == (401, "RepoNotFound")
    assert {status for _, _, status in local_hub.requests} == {401}

    path = Path(snapshot_download("org/private", token=local_hub.token))
    assert (path / "model.safetensors").read_bytes() == WEIGHTS
    assert api.model_info("org/private", token=local_hub.token).private is True


def test_private_flag_applies_from_that_commit_on(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/r", {"config.json": "1"})
    assert HfApi().model_info("org/r").sha
    local_hub.add_repo("org/r", {"config.json": "2"}, private=True)
    with pytest.raises(RepositoryNotFoundError):
        HfApi().model_info("org/r")


def test_gated_repo_files_need_the_token(local_hub: LocalHub) -> None:
    commit = local_hub.add_repo("org/gated", FILES, gated=True)
    api = HfApi()

    with pytest.raises(GatedRepoError):
        snapshot_download("org/gated")
    with pytest.raises(GatedRepoError):
        hf_hub_download("org/gated", "config.json")
    # As on the Hub, the card and the listing stay public; only file bytes are gated.
    assert api.model_info("org/gated").sha == commit
    assert len(list(api.list_repo_tree("org/gated", recursive=True))) == 7
    raw = get_session().head(hf_hub_url("org/gated", "config.json"))
    assert (raw.status_code, raw.headers["X-Error-Code"]) == (403, "GatedRepo")

    path = Path(snapshot_download("org/gated", token=local_hub.token))
    assert (path / "config.json").read_text() == CONFIG


def test_unknown_repo(local_hub: LocalHub) -> None:
    with pytest.raises(RepositoryNotFoundError):
        snapshot_download("org/nothing")
    with pytest.raises(RepositoryNotFoundError):
        HfApi().dataset_info("org/nothing")
    assert local_hub.requests[0] == ("GET", "/api/models/org/nothing/revision/main", 401)


def test_unknown_revision(hub: LocalHub) -> None:
    with pytest.raises(RevisionNotFoundError):
        snapshot_download("org/tiny", revision="nope")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("org/tiny", "config.json", revision="nope")
    with pytest.raises(RevisionNotFoundError):
        snapshot_download("org/tiny", revision="0" * 40)
    assert {status for _, _, status in hub.requests} == {404}


def test_unknown_file(hub: LocalHub) -> None:
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download("org/tiny", "missing.json")

    assert hub.requests == [("HEAD", "/org/tiny/resolve/main/missing.json", 404)]
    # The client caches the miss under the commit the 404 names.
    assert hub.cache_dir is not None
    assert list(hub.cache_dir.glob("models--org--tiny/.no_exist/*/missing.json"))


def test_hostile_listing_entries(hub: LocalHub) -> None:
    served = hub.add_raw_tree_entry("org/tiny", "../escape.txt", "pwned")
    hub.add_raw_tree_entry("org/tiny", "/etc/passwd", "root", entry={"size": 1})

    listed = {e.path: e for e in HfApi().list_repo_tree("org/tiny", recursive=True) if isinstance(e, RepoFile)}
    assert served["path"] == "../escape.txt"
    assert {"../escape.txt", "/etc/passwd"} <= set(listed)
    assert listed["/etc/passwd"].size == 1  # the override lies about the size
    infos = HfApi().get_paths_info("org/tiny", ["../escape.txt"])
    assert [i.path for i in infos] == ["../escape.txt"]
    with pytest.raises(ValueError, match="add_raw_tree_entry"):
        hub.add_repo("org/tiny", {"../x": "no"})


# -- fault plan: fail ------------------------------------------------------------------------


def test_fail_on_revision_is_not_retried_by_the_client(hub: LocalHub) -> None:
    hub.fail("*/revision/*", 500)

    with pytest.raises(LocalEntryNotFoundError) as raised:
        snapshot_download("org/tiny")

    assert isinstance(raised.value.__cause__, HfHubHTTPError)
    assert raised.value.__cause__.response.status_code == 500
    assert hub.requests == [("GET", "/api/models/org/tiny/revision/main", 500)]
    assert hub.pending_faults() == []
    assert Path(snapshot_download("org/tiny")).is_dir()


def test_fail_below_the_client_retries_is_absorbed(hub: LocalHub, client_sleeps: list[float]) -> None:
    hub.fail("*model.safetensors", 503, times=2)

    path = Path(hf_hub_download("org/tiny", "model.safetensors"))

    assert path.read_bytes() == WEIGHTS
    assert hub.requests == [
        ("HEAD", "/org/tiny/resolve/main/model.safetensors", 503),
        ("HEAD", "/org/tiny/resolve/main/model.safetensors", 503),
        ("HEAD", "/org/tiny/resolve/main/model.safetensors", 200),
        ("GET", "/org/tiny/resolve/main/model.safetensors", 200),
    ]
    assert client_sleeps == [1]  # one backoff sleep between the retried HEADs


def test_fail_above_the_client_retries_surfaces(hub: LocalHub, client_sleeps: list[float]) -> None:
    hub.fail("*model.safetensors", 500, times=10)

    with pytest.raises(LocalEntryNotFoundError) as raised:
        hf_hub_download("org/tiny", "model.safetensors")

    assert isinstance(raised.value.__cause__, HfHubHTTPError)
    # One plain HEAD, then http_backoff's 1 + 5 retries: the client sends 7 HEADs in all.
    assert hub.request_count(method="HEAD", status=500) == 7
    assert hub.request_count(method="GET") == 0
    assert hub.pending_faults() == [("fail", "*model.safetensors", 3)]
    assert client_sleeps == [1, 2, 4, 8, 8]


def test_fail_on_tree_listing(hub: LocalHub, client_sleeps: list[float]) -> None:
    hub.fail("*/tree/*", 502)

    try:
        snapshot_download("org/tiny")
        outcome = "retried"
    except HfHubHTTPError as error:  # 1.x lists the tree without retry and lets the error out
        assert error.response.status_code == 502
        outcome = "raised"

    statuses = [s for _, p, s in hub.requests if "/tree/" in p]
    assert statuses == ([502, 200] if outcome == "retried" else [502])
    assert hub.pending_faults() == []


def test_429_retry_after_is_honoured(hub: LocalHub, client_sleeps: list[float]) -> None:
    hub.fail("*config.json", 429, times=2, retry_after=3)

    assert Path(hf_hub_download("org/tiny", "config.json")).read_text() == CONFIG

    assert [s for _, _, s in hub.requests] == [429, 429, 200, 200]
    # The client waits Retry-After + 1 s before its retry.
    assert client_sleeps == [4.0]
    response = get_session().head(hf_hub_url("org/tiny", "config.json"))
    assert response.status_code == 200


def test_fail_counts_head_requests_and_a_failed_request_gets_no_other_fault(hub: LocalHub) -> None:
    url = hf_hub_url("org/tiny", "config.json")
    hub.fail("*config.json", 500)
    hub.corrupt("*config.json")

    assert get_session().head(url).status_code == 500
    body = get_session().get(url)

    assert body.status_code == 200
    assert body.content != CONFIG.encode()  # the corrupt entry was still pending
    assert len(body.content) == len(CONFIG)
    assert hub.pending_faults() == []


def test_fail_with_method_and_error_code(hub: LocalHub, client_sleeps: list[float]) -> None:
    hub.fail("*model.safetensors", 403, method="GET", error_code="GatedRepo")

    with pytest.raises(GatedRepoError):
        hf_hub_download("org/tiny", "model.safetensors")

    assert [(m, s) for m, _, s in hub.requests] == [("HEAD", 200), ("GET", 403)]


def test_fault_entries_are_used_in_order(hub: LocalHub) -> None:
    url = hf_hub_url("org/tiny", "config.json")
    session = get_session()
    hub.fail("*config.json", 500)
    hub.fail("*config.json", 503, times=2)
    hub.cut("*config.json", 3)
    hub.corrupt("*config.json")
    hub.fail("*other*", 500)

    statuses = [session.get(url).status_code for _ in range(3)]
    with pytest.raises(HTTP.RemoteProtocolError):
        session.get(url)
    corrupted = session.get(url).content
    clean = session.get(url).content

    assert statuses == [500, 503, 503]
    assert len(corrupted) == len(CONFIG) and corrupted != CONFIG.encode()
    assert sum(a != b for a, b in zip(corrupted, CONFIG.encode(), strict=True)) == 1
    assert clean == CONFIG.encode()
    assert hub.pending_faults() == [("fail", "*other*", 1)]
    hub.clear_faults()
    assert hub.pending_faults() == []


# -- fault plan: cut, corrupt, slow ------------------------------------------------------------


def test_cut_once_is_retried_by_the_client(hub: LocalHub, client_sleeps: list[float]) -> None:
    hub.cut("*model.safetensors", 1000)

    path = Path(hf_hub_download("org/tiny", "model.safetensors"))

    assert path.read_bytes() == WEIGHTS
    # The HEAD carries no body, so the cut waited for the GET. The client reads 10 MB chunks and
    # counts only whole ones, so the 1000 bytes it got are dropped and it starts over without Range.
    assert [(m, s) for m, _, s in hub.requests] == [("HEAD", 200), ("GET", 200), ("GET", 200)]
    assert hub.bytes_served["/org/tiny/resolve/main/model.safetensors"] == 1000 + len(WEIGHTS)
    assert client_sleeps == [1]


def test_cut_beyond_the_client_retries_raises_a_protocol_error(hub: LocalHub, client_sleeps: list[float]) -> None:
    hub.cut("*model.safetensors", 100, times=10)

    with pytest.raises(HTTP.RemoteProtocolError):
        hf_hub_download("org/tiny", "model.safetensors")

    # The first GET and 5 retries, each cut after 100 bytes.
    assert hub.request_count(method="GET") == 6
    assert hub.bytes_served["/org/tiny/resolve/main/model.safetensors"] == 600
    assert hub.pending_faults() == [("cut", "*model.safetensors", 4)]
    assert hub.cache_dir is not None
    leftovers = [p.name for p in blob_dir(hub.cache_dir, "org/tiny").iterdir()]
    assert all(name.endswith(".incomplete") for name in leftovers)


def test_cut_json_endpoint(hub: LocalHub) -> None:
    hub.cut("*/revision/*", 5)

    with pytest.raises(Exception) as raised:
        snapshot_download("org/tiny")

    chain = [raised.value, raised.value.__cause__, raised.value.__context__]
    assert any(isinstance(e, HTTP.RemoteProtocolError) for e in chain)
    assert hub.bytes_served["/api/models/org/tiny/revision/main"] == 5


def test_corrupt_is_stored_by_the_client_under_the_right_name(hub: LocalHub) -> None:
    hub.corrupt("*model.safetensors")

    path = Path(hf_hub_download("org/tiny", "model.safetensors"))

    data = path.read_bytes()
    assert len(data) == len(WEIGHTS)
    assert sha256(data) != sha256(WEIGHTS)
    assert sum(a != b for a, b in zip(data, WEIGHTS, strict=True)) == 1
    # The blob is named after the hash it does not have: the client never checks.
    assert path.resolve().name == sha256(WEIGHTS)
    assert [(m, s) for m, _, s in hub.requests] == [("HEAD", 200), ("GET", 200)]


def test_slow_paces_all_bodies_together(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/slow", {"a.bin": b"a" * 6000, "b.bin": b"b" * 6000})
    local_hub.slow(30_000)  # 12 kB in all: at least 0.4 s

    started = time.monotonic()
    threads = [threading.Thread(target=hf_hub_download, args=("org/slow", name)) for name in ("a.bin", "b.bin")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started

    assert elapsed >= 0.35
    assert local_hub.served("*.bin") == 12_000
    local_hub.slow(None)
    started = time.monotonic()
    snapshot_download("org/slow", force_download=True)
    assert time.monotonic() - started < 0.35


# -- counters -------------------------------------------------------------------------------


def test_requests_and_bytes_served_are_exact(hub: LocalHub) -> None:
    commit = Path(snapshot_download("org/tiny")).name

    resolve = [(m, p) for m, p, _ in hub.requests if "/resolve/" in p]
    expected = sorted((m, f"/org/tiny/resolve/{commit}/{name}") for name in FILES for m in ("HEAD", "GET"))
    assert sorted(resolve) == expected
    assert hub.requests[0] == ("GET", "/api/models/org/tiny/revision/main", 200)
    assert hub.request_count("/api/models/org/tiny/tree/*") == 1
    assert len(hub.requests) == 2 + 2 * len(FILES)
    for name, content in FILES.items():
        size = len(content.encode() if isinstance(content, str) else content)
        assert hub.bytes_served[f"/org/tiny/resolve/{commit}/{name}"] == size
    assert hub.bytes_served["/api/models/org/tiny/revision/main"] > 0
    assert hub.served("/org/tiny/resolve/*") == sum(
        len(c.encode() if isinstance(c, str) else c) for c in FILES.values()
    )

    hub.reset_counters()
    assert (hub.requests, hub.bytes_served) == ([], {})


def test_error_bodies_are_counted(local_hub: LocalHub) -> None:
    response = get_session().get(f"{local_hub.url}/api/models/org/none/revision/main")

    assert response.status_code == 401
    assert local_hub.bytes_served["/api/models/org/none/revision/main"] == len(response.content) > 0
    assert local_hub.requests == [("GET", "/api/models/org/none/revision/main", 401)]


# -- the class on its own ----------------------------------------------------------------------


def test_local_hub_start_stop_and_validation() -> None:
    hub = LocalHub().start()
    try:
        url = hub.url
        assert get_session().get(f"{url}/api/models/x/y").status_code == 401
    finally:
        hub.stop()
    with pytest.raises(RuntimeError):
        _ = hub.url
    with pytest.raises(ValueError):
        hub.add_repo("a/b/c", {})
    with pytest.raises(ValueError):
        hub.add_repo("org/name", {}, repo_type="model-ish")
    with pytest.raises(ValueError):
        hub.add_repo("org/name", {"/abs": "x"})
    with pytest.raises(ValueError):
        hub.fail("*", 500, times=0)


@pytest.fixture
def two_hubs(tmp_path: Path) -> Iterator[tuple[LocalHub, LocalHub]]:
    with LocalHub() as first, LocalHub() as second:
        yield first, second


def test_hubs_are_independent(two_hubs: tuple[LocalHub, LocalHub], tmp_path: Path) -> None:
    first, second = two_hubs
    first.add_repo("org/r", {"config.json": "first"})
    second.add_repo("org/r", {"config.json": "second"})

    assert first.url != second.url
    assert first.token != second.token
    for hub, content in ((first, "first"), (second, "second")):
        with hub.configure_client(tmp_path / content):
            assert Path(hf_hub_download("org/r", "config.json")).read_text() == content
