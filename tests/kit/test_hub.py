"""The local Hub double, driven by the real huggingface_hub client (1.x and 2.x) and hf_xet.

A test that downloads through the local Hub runs on the client's three transfer paths
(``tests/conftest.py``): Xet into the shared blob store, Xet with repo-local blobs, plain HTTP
through the CDN origin. A test of the server's own answers runs once (``SERVER``, the default);
a test of plain-HTTP storage uses ``@pytest.mark.local_hub(xet=False)`` (``plain_storage``);
``STORAGES`` runs a test on both storages.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

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

from pytest_hfsnapshot.testing.hub import LocalHub, client_patches, git_blob_sha1

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
INVALID = "Invalid credentials in Authorization header"

T = TypeVar("T", bound=Callable[..., object])

SERVER = pytest.mark.transports("xet")
"""A test of the server's own answers: one client transport is enough."""

STORAGES = pytest.mark.parametrize("storage", ["xet", pytest.param("plain", marks=pytest.mark.local_hub(xet=False))])
"""Run the test on Xet storage (the default when hf_xet is installed) and on plain-HTTP storage."""


def plain_storage(test: T) -> T:
    """The hub serves LFS files by plain HTTP at /resolve (``xet=False``): every transport is the same."""
    return pytest.mark.local_hub(xet=False)(pytest.mark.transports("http")(test))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def blob_dir(cache_dir: Path, repo_id: str, repo_type: str = "model") -> Path:
    return cache_dir / f"{repo_type}s--{repo_id.replace('/', '--')}" / "blobs"


def size_of(content: bytes | str) -> int:
    return len(content.encode() if isinstance(content, str) else content)


def xet_hash_of(repo_id: str, path: str, revision: str = "main", repo_type: str = "model") -> str:
    (entry,) = HfApi().get_paths_info(repo_id, [path], revision=revision, repo_type=repo_type)
    assert isinstance(entry, RepoFile) and entry.xet_hash is not None
    return entry.xet_hash


@pytest.fixture
def client_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the client's backoff sleeps instead of sleeping, so retry tests stay fast.

    Only huggingface_hub's own modules see the stand-in; the server (and hf_xet) keep real time.
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


@SERVER
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
    # hf_xet's logs and staging go to the test's home, not to ~/.cache.
    assert Path(os.environ["HF_XET_CACHE"]).parent == Path(os.environ["HF_HOME"]) == Path(constants.HF_HOME)
    assert {"127.0.0.1", "127.0.0.2", "localhost"} <= set(os.environ["NO_PROXY"].split(","))
    assert local_hub.xet
    assert urlsplit(local_hub.cdn_url).hostname == "127.0.0.2"
    assert urlsplit(local_hub.cas_url).hostname == "127.0.0.1"
    assert len({local_hub.url, local_hub.cas_url, local_hub.cdn_url}) == 3


def test_client_patches_leave_xet_as_the_environment_has_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "internal.example")
    patches = client_patches("http://127.0.0.1:1234", tmp_path / "cache", tmp_path / "home")

    assert "HF_HUB_DISABLE_XET" not in patches.environ
    assert "HF_HUB_DISABLE_XET" not in {name for _, name, _ in patches.attributes}
    assert patches.environ["HF_XET_CACHE"] == str(tmp_path / "home" / "xet")
    assert patches.environ["NO_PROXY"] == "internal.example,127.0.0.1,127.0.0.2,localhost"


def test_client_patches_apply_one_way_with_or_without_pytest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants as constants

    monkeypatch.setenv("HF_TOKEN", "hf_ambient")
    patches = client_patches("http://127.0.0.1:1234", tmp_path / "cache", tmp_path / "home")
    endpoint, env_endpoint = constants.ENDPOINT, os.environ.get("HF_ENDPOINT")

    with patches.applied():  # on its own: undone when the block ends
        assert (constants.ENDPOINT, os.environ["HF_ENDPOINT"]) == ("http://127.0.0.1:1234",) * 2
        assert "HF_TOKEN" not in os.environ
    assert (constants.ENDPOINT, os.environ.get("HF_ENDPOINT"), os.environ["HF_TOKEN"]) == (
        endpoint,
        env_endpoint,
        "hf_ambient",
    )

    with pytest.MonkeyPatch.context() as patcher:
        with patches.applied(patcher):  # through a MonkeyPatch: undone when it undoes
            pass
        assert constants.ENDPOINT == "http://127.0.0.1:1234"
    assert endpoint == constants.ENDPOINT

    child = patches.child_environ({"HF_TOKEN": "hf_ambient", "PATH": "/bin"})
    assert child["PATH"] == "/bin" and child["HF_ENDPOINT"] == "http://127.0.0.1:1234" and "HF_TOKEN" not in child


def test_local_hub_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        def test_default(local_hub):
            assert local_hub.xet

        @pytest.mark.local_hub(xet=False)
        def test_plain(local_hub):
            assert not local_hub.xet
            with pytest.raises(RuntimeError, match="without Xet"):
                local_hub.cas_url

        @pytest.mark.local_hub(tree_page_size=3, xet_token_ttl=5)
        def test_options(local_hub):
            assert (local_hub.tree_page_size, local_hub.xet_token_ttl) == (3, 5)

        @pytest.mark.local_hub(False)
        def test_positional(local_hub):
            pass
        """
    )
    result = pytester.runpytest("--strict-markers")

    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*local_hub takes keywords only*"])


@SERVER
def test_bare_snapshot_download_goes_to_the_hub(hub: LocalHub) -> None:
    path = Path(snapshot_download("org/tiny"))

    assert hub.cache_dir is not None
    assert path.is_relative_to(hub.cache_dir)
    assert (path / "config.json").read_text() == CONFIG
    assert hub.request_count("/api/models/org/tiny/revision/main") == 1


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_ambient_token_is_hidden_then_usable(local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch) -> None:
    local_hub.add_repo("org/secret", {"config.json": CONFIG, "model.safetensors": WEIGHTS}, private=True)
    with pytest.raises(RepositoryNotFoundError):
        snapshot_download("org/secret")

    monkeypatch.setenv("HF_TOKEN", local_hub.token)
    path = Path(snapshot_download("org/secret"))
    assert (path / "config.json").read_text() == CONFIG
    assert (path / "model.safetensors").read_bytes() == WEIGHTS


def test_configure_client_works_without_pytest_and_restores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_ambient")
    endpoint_before, cache_before = constants.ENDPOINT, constants.HF_HUB_CACHE
    ports = set()
    for round_ in range(2):  # a new server on a new port each time: no stale client session
        with LocalHub() as hub, hub.configure_client(tmp_path / f"cache{round_}") as cache:
            hub.add_repo("org/tiny", {"config.json": CONFIG, "model.safetensors": WEIGHTS})
            ports.add(hub.url)
            assert huggingface_hub.get_token() is None
            path = Path(snapshot_download("org/tiny"))
            assert path.is_relative_to(cache)
            assert (path / "model.safetensors").read_bytes() == WEIGHTS
            assert hub.request_count("*/resolve/*/config.json") == 2
    assert len(ports) == 2
    assert endpoint_before == constants.ENDPOINT
    assert cache_before == constants.HF_HUB_CACHE
    assert os.environ["HF_TOKEN"] == "hf_ambient"
    assert os.environ.get("HF_ENDPOINT") not in ports


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_child_processes_reach_the_hub_through_the_environment(hub: LocalHub, transport: str) -> None:
    code = "import huggingface_hub as h; print(h.snapshot_download('org/tiny'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)

    assert hub.cache_dir is not None
    path = Path(done.stdout.strip())
    assert path.is_relative_to(hub.cache_dir)
    assert (path / "model.safetensors").read_bytes() == WEIGHTS
    assert hub.request_count("*/resolve/*/config.json", method="GET") == 1
    # The child took the transfer path the environment asked for.
    assert (hub.counters().request_count(method="GET", pattern="/cdn/*") == 1) == (transport == "http")
    assert (hub.request_count("*/reconstructions/*") == 1) == (transport != "http")


@SERVER
def test_telemetry_route_is_absent(local_hub: LocalHub) -> None:
    assert get_session().get(f"{local_hub.url}/api/agent-harnesses").status_code == 404


@SERVER
def test_whoami(local_hub: LocalHub) -> None:
    assert HfApi().whoami(token=local_hub.token)["name"] == "local-hub-user"
    with pytest.raises(HfHubHTTPError):
        HfApi().whoami(token="hf_wrong")


@SERVER
def test_a_token_other_than_the_hubs_is_refused_on_every_endpoint(hub: LocalHub) -> None:
    commit = HfApi().model_info("org/tiny").sha
    session = get_session()
    wrong = {"Authorization": "Bearer hf_wrong"}
    api = f"{hub.url}/api/models/org/tiny"
    gets = [
        api,
        f"{api}/revision/main",
        f"{api}/tree/main",
        f"{api}/refs",
        f"{api}/xet-read-token/main",
        f"{hub.url}/api/whoami-v2",
        f"{hub.url}/api/agent-harnesses",
        hf_hub_url("org/tiny", "config.json"),
        hf_hub_url("org/tiny", "model.safetensors"),
        f"{hub.url}/api/models/org/nothing/revision/main",
    ]
    answers = [session.get(url, headers=wrong, follow_redirects=False) for url in gets]
    answers.append(session.head(hf_hub_url("org/tiny", "config.json"), headers=wrong))
    answers.append(session.post(f"{api}/paths-info/main", data={"paths": ["config.json"]}, headers=wrong))
    # The CAS refuses a token it did not hand out the same way.
    xet_hash = xet_hash_of("org/tiny", "model.safetensors", commit or "main")
    answers.append(session.get(f"{hub.cas_url}/v2/reconstructions/{xet_hash}", headers=wrong))

    assert [(a.status_code, a.headers.get("X-Error-Message")) for a in answers] == [(401, INVALID)] * len(answers)
    assert all("X-Error-Code" not in a.headers for a in answers)
    # The client tells it apart from a missing repo; without any token the repo is public again.
    with pytest.raises(HfHubHTTPError) as raised:
        HfApi().model_info("org/tiny", token="hf_wrong")
    assert not isinstance(raised.value, RepositoryNotFoundError)
    assert raised.value.response.status_code == 401
    assert session.get(f"{api}/revision/main").status_code == 200


# -- repos, revisions, listings ------------------------------------------------------------------


@pytest.mark.transports("xet", "xet-noshare", "http")
@STORAGES
@pytest.mark.parametrize(("repo_type", "prefix"), [("model", ""), ("dataset", "datasets/"), ("space", "spaces/")])
def test_snapshot_and_file_download_for_each_repo_type(
    local_hub: LocalHub, repo_type: str, prefix: str, storage: str
) -> None:
    commit = local_hub.add_repo("org/thing", FILES, repo_type=repo_type)

    path = Path(snapshot_download("org/thing", repo_type=repo_type))
    single = hf_hub_download("org/thing", "config.json", repo_type=repo_type)

    assert path.name == commit
    assert sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()) == sorted(FILES)
    assert (path / "model.safetensors").read_bytes() == WEIGHTS
    assert Path(single).read_text() == CONFIG
    plural = f"{repo_type}s"
    assert local_hub.request_count(f"/api/{plural}/org/thing/revision/main") == 1
    resolve = f"/{prefix}org/thing/resolve/{commit}/"
    assert local_hub.request_count(resolve + "config.json", method="GET") == 1
    # Each file's bytes went out, whichever origin served them: CDN and CAS requests count as the
    # file's own resolve path. (Xorbs hold these weights compressed.)
    assert all(local_hub.served(resolve + name) > 0 for name in FILES)
    assert local_hub.served(resolve + "model.safetensors") < 2 * len(WEIGHTS)
    info = HfApi().repo_info("org/thing", repo_type=repo_type)
    assert isinstance(info, (ModelInfo, DatasetInfo, SpaceInfo))
    assert info.sha == commit
    assert sorted(s.rfilename for s in info.siblings or []) == sorted(FILES)


@SERVER
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


@STORAGES
def test_branches_tags_and_several_commits(local_hub: LocalHub, storage: str) -> None:
    def files(label: str, **extra: str) -> dict[str, bytes | str]:
        return {"config.json": label, "model.safetensors": label.encode() * 100, **extra}

    first = local_hub.add_repo("org/r", files("1"), tag="v1")
    second = local_hub.add_repo("org/r", files("2", **{"extra.txt": "e"}))
    dev = local_hub.add_repo("org/r", files("dev"), branch="dev")
    pr = local_hub.add_repo("org/r", files("pr"), branch="refs/pr/1")

    assert len({first, second, dev, pr}) == 4
    assert all(len(c) == 40 and int(c, 16) >= 0 for c in (first, second, dev, pr))
    expected = {"main": (second, "2"), "v1": (first, "1"), first: (first, "1"), "dev": (dev, "dev")}
    for revision, (commit, content) in expected.items():
        path = Path(snapshot_download("org/r", revision=revision))
        assert path.name == commit
        assert (path / "config.json").read_text() == content
        assert (path / "model.safetensors").read_bytes() == content.encode() * 100
    # Each commit's tree is exactly its files: the second commit added a file, the tag's did not.
    assert not (Path(snapshot_download("org/r", revision="v1")) / "extra.txt").exists()
    # A 40-hex commit needs no revision lookup.
    assert local_hub.request_count(f"*/revision/{first}") == 0

    assert Path(hf_hub_download("org/r", "config.json", revision="refs/pr/1")).read_text() == "pr"
    assert Path(hf_hub_download("org/r", "model.safetensors", revision="refs/pr/1")).read_bytes() == b"pr" * 100
    assert local_hub.request_count("/org/r/resolve/refs/pr/1/config.json", method="HEAD") == 1
    api = HfApi()
    assert api.model_info("org/r", revision="refs/pr/1").sha == pr
    assert api.revision_exists("org/r", "v1")
    assert not api.revision_exists("org/r", "v2")
    refs = api.list_repo_refs("org/r", include_pull_requests=True)
    assert {b.name: b.target_commit for b in refs.branches} == {"main": second, "dev": dev}
    assert {t.name: t.target_commit for t in refs.tags} == {"v1": first}
    assert [p.name for p in refs.pull_requests or []] == ["refs/pr/1"]


@SERVER
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


@SERVER
def test_paths_info_and_file_exists(hub: LocalHub) -> None:
    api = HfApi()
    infos = {i.path: i for i in api.get_paths_info("org/tiny", ["config.json", "tokenizer", "missing.txt"])}

    assert sorted(infos) == ["config.json", "tokenizer"]
    assert api.file_exists("org/tiny", "config.json")
    assert not api.file_exists("org/tiny", "missing.txt")
    assert not api.file_exists("org/other", "config.json")


@STORAGES
@SERVER
def test_listings_carry_the_xet_hash_of_xet_backed_files(local_hub: LocalHub, storage: str) -> None:
    twin = os.urandom(1000)
    local_hub.add_repo("org/a", {"config.json": CONFIG, "model.safetensors": WEIGHTS, "big.txt": "x" * (1 << 20)})
    local_hub.add_repo("org/b", {"weights.bin": twin, "copy.bin": twin}, repo_type="dataset")
    api = HfApi()

    tree = {e.path: e for e in api.list_repo_tree("org/a") if isinstance(e, RepoFile)}
    infos = {e.path: e for e in api.get_paths_info("org/a", list(tree)) if isinstance(e, RepoFile)}
    pair = [e for e in api.list_repo_tree("org/b", repo_type="dataset") if isinstance(e, RepoFile)]

    assert tree["config.json"].xet_hash is None
    for name in ("model.safetensors", "big.txt"):  # LFS by suffix, LFS by size
        if storage == "xet":
            assert tree[name].xet_hash is not None and len(tree[name].xet_hash) == 64
        else:
            assert tree[name].xet_hash is None
        assert infos[name].xet_hash == tree[name].xet_hash
    # Same bytes, same xet hash: a content hash, whatever the path or the repo.
    assert pair[0].xet_hash == pair[1].xet_hash
    if storage == "xet":
        assert tree["model.safetensors"].xet_hash != tree["big.txt"].xet_hash


@pytest.mark.transports("xet", "xet-noshare", "http")
@STORAGES
def test_lfs_and_git_etags_name_the_cached_blobs(local_hub: LocalHub, storage: str) -> None:
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
            assert meta.xet_file_data is None
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
            xet = meta.xet_file_data
            assert (xet is not None) == (storage == "xet")
            assert xet is None or xet.file_hash == entry.xet_hash
        assert entry.size == len(data)

    snapshot_download("org/lfs")
    assert local_hub.cache_dir is not None
    blobs = sorted(p.name for p in blob_dir(local_hub.cache_dir, "org/lfs").iterdir())
    assert blobs == sorted([git_blob_sha1(CONFIG.encode()), sha256(WEIGHTS), sha256(big_text)])


@plain_storage
def test_file_headers_never_advertise_xet_or_redirect(hub: LocalHub) -> None:
    lfs = get_session().head(hf_hub_url("org/tiny", "model.safetensors"), follow_redirects=False)
    small = get_session().head(hf_hub_url("org/tiny", "config.json"), follow_redirects=False)

    assert lfs.status_code == small.status_code == 200
    assert lfs.headers["X-Linked-Etag"] == f'"{sha256(WEIGHTS)}"'
    assert lfs.headers["X-Linked-Size"] == str(len(WEIGHTS))
    assert "X-Linked-Etag" not in small.headers
    assert small.headers["ETag"] == f'"{git_blob_sha1(CONFIG.encode())}"'
    for response in (lfs, small):
        assert "X-Xet-Hash" not in response.headers
        assert "Link" not in response.headers
        assert len(response.headers["X-Repo-Commit"]) == 40
    assert hub.served("/org/tiny/resolve/main/config.json") == 0
    assert get_session().get(f"{hub.url}/api/models/org/tiny/xet-read-token/main").status_code == 404


@SERVER
def test_xet_file_resolves_to_a_302_to_the_cdn_carrying_the_metadata(hub: LocalHub) -> None:
    commit = HfApi().model_info("org/tiny").sha
    url = hf_hub_url("org/tiny", "model.safetensors")
    session = get_session()

    head = session.head(url, follow_redirects=False)
    get = session.get(url, follow_redirects=False)
    small = session.head(hf_hub_url("org/tiny", "config.json"), follow_redirects=False)

    xet_hash = xet_hash_of("org/tiny", "model.safetensors")
    for response in (head, get):
        assert response.status_code == 302
        assert response.content == b""
        assert response.headers["X-Xet-Hash"] == xet_hash
        assert response.headers["ETag"] == response.headers["X-Linked-Etag"] == f'"{sha256(WEIGHTS)}"'
        assert response.headers["X-Linked-Size"] == str(len(WEIGHTS))
        assert response.headers["X-Repo-Commit"] == commit
        refresh = f"{hub.url}/api/models/org/tiny/xet-read-token/{commit}"
        assert f'<{refresh}>; rel="xet-auth"' in response.headers["Link"]
        location = response.headers["Location"]
        assert location == f"{hub.cdn_url}/cdn/models/org%2Ftiny/{commit}/model.safetensors"
        assert urlsplit(location).hostname == "127.0.0.2"
    # The client reads the same from the 302 (it does not follow it to another host).
    meta = get_hf_file_metadata(url)
    assert meta.xet_file_data is not None
    assert (meta.xet_file_data.file_hash, meta.xet_file_data.refresh_route) == (xet_hash, refresh)
    assert (meta.etag, meta.size, meta.commit_hash) == (sha256(WEIGHTS), len(WEIGHTS), commit)
    # A small file is served in place.
    assert small.status_code == 200
    assert "X-Xet-Hash" not in small.headers
    # The CDN is "presigned": no token, and it serves HEAD, GET and ranges.
    cdn_head = session.head(head.headers["Location"])
    cdn_get = session.get(head.headers["Location"])
    assert (cdn_head.status_code, cdn_head.headers["Content-Length"]) == (200, str(len(WEIGHTS)))
    assert (cdn_get.status_code, cdn_get.content) == (200, WEIGHTS)
    assert cdn_get.headers["ETag"] == f'"{sha256(WEIGHTS)}"'
    assert session.get(f"{hub.cdn_url}/cdn/models/org%2Ftiny/{'0' * 40}/model.safetensors").status_code == 404


@STORAGES
@SERVER
def test_range_requests(hub: LocalHub, storage: str) -> None:
    session = get_session()
    url = hf_hub_url("org/tiny", "model.safetensors")
    if storage == "xet":  # the bytes are on the CDN
        url = session.head(url, follow_redirects=False).headers["Location"]
    hub.reset_counters()

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
    assert hub.served("*model.safetensors") == 10 + 5 + (len(WEIGHTS) - 3000) + len(beyond.content)
    assert hub.bytes_served == hub.served("*model.safetensors")


# -- access control and not-found errors -----------------------------------------------------


@pytest.mark.transports("xet", "xet-noshare", "http")
@STORAGES
def test_private_repo_is_not_found_on_every_endpoint_without_the_token(local_hub: LocalHub, storage: str) -> None:
    local_hub.add_repo("org/private", FILES, private=True)
    api = HfApi()
    session = get_session()

    with pytest.raises(RepositoryNotFoundError) as raised:
        snapshot_download("org/private")
    assert not isinstance(raised.value, GatedRepoError)
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("org/private", "model.safetensors")
    with pytest.raises(RepositoryNotFoundError):
        list(api.list_repo_tree("org/private"))
    with pytest.raises(RepositoryNotFoundError):
        api.get_paths_info("org/private", ["config.json"])
    raw = session.get(hf_hub_url("org/private", "config.json"))
    assert (raw.status_code, raw.headers["X-Error-Code"]) == (401, "RepoNotFound")
    if storage == "xet":
        token = session.get(f"{local_hub.url}/api/models/org/private/xet-read-token/main")
        assert (token.status_code, token.headers["X-Error-Code"]) == (401, "RepoNotFound")
    assert {status for _, _, status in local_hub.requests} == {401}

    path = Path(snapshot_download("org/private", token=local_hub.token))
    assert (path / "model.safetensors").read_bytes() == WEIGHTS
    assert api.model_info("org/private", token=local_hub.token).private is True


@SERVER
def test_private_flag_applies_from_that_commit_on(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/r", {"config.json": "1"})
    assert HfApi().model_info("org/r").sha
    local_hub.add_repo("org/r", {"config.json": "2"}, private=True)
    with pytest.raises(RepositoryNotFoundError):
        HfApi().model_info("org/r")


@pytest.mark.transports("xet", "xet-noshare", "http")
@STORAGES
def test_gated_repo_files_need_the_token(local_hub: LocalHub, storage: str) -> None:
    commit = local_hub.add_repo("org/gated", FILES, gated=True)
    api = HfApi()
    session = get_session()

    with pytest.raises(GatedRepoError):
        snapshot_download("org/gated")
    with pytest.raises(GatedRepoError):
        hf_hub_download("org/gated", "config.json")
    with pytest.raises(GatedRepoError):
        hf_hub_download("org/gated", "model.safetensors", revision=commit)
    # As on the Hub, the card and the listing stay public; only file bytes are gated.
    assert api.model_info("org/gated").sha == commit
    assert len(list(api.list_repo_tree("org/gated", recursive=True))) == 7
    raw = session.head(hf_hub_url("org/gated", "config.json"))
    assert (raw.status_code, raw.headers["X-Error-Code"]) == (403, "GatedRepo")
    token_route = f"{local_hub.url}/api/models/org/gated/xet-read-token/{commit}"
    if storage == "xet":
        refused = session.get(token_route)
        assert (refused.status_code, refused.headers["X-Error-Code"]) == (403, "GatedRepo")
        granted = session.get(token_route, headers={"Authorization": f"Bearer {local_hub.token}"})
        assert granted.status_code == 200
        assert set(granted.json()) == {"accessToken", "exp", "casUrl"}

    path = Path(snapshot_download("org/gated", token=local_hub.token))
    assert (path / "config.json").read_text() == CONFIG
    assert (path / "model.safetensors").read_bytes() == WEIGHTS


@SERVER
def test_unknown_repo(local_hub: LocalHub) -> None:
    with pytest.raises(RepositoryNotFoundError):
        snapshot_download("org/nothing")
    with pytest.raises(RepositoryNotFoundError):
        HfApi().dataset_info("org/nothing")
    assert local_hub.requests[0] == ("GET", "/api/models/org/nothing/revision/main", 401)


@SERVER
def test_unknown_revision(hub: LocalHub) -> None:
    with pytest.raises(RevisionNotFoundError):
        snapshot_download("org/tiny", revision="nope")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("org/tiny", "config.json", revision="nope")
    with pytest.raises(RevisionNotFoundError):
        snapshot_download("org/tiny", revision="0" * 40)
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("org/tiny", "model.safetensors", revision="nope")
    assert {status for _, _, status in hub.requests} == {404}


def test_unknown_file(hub: LocalHub) -> None:
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download("org/tiny", "missing.json")

    assert hub.requests == [("HEAD", "/org/tiny/resolve/main/missing.json", 404)]
    # The client caches the miss under the commit the 404 names.
    assert hub.cache_dir is not None
    assert list(hub.cache_dir.glob("models--org--tiny/.no_exist/*/missing.json"))


@SERVER
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


# -- Xet storage: the transfer paths ------------------------------------------------------------

MIB = 1024 * 1024


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_cold_snapshot_download_requests_on_each_transport(local_hub: LocalHub, transport: str) -> None:
    weights = random.Random(7).randbytes(4 * MIB)
    commit = local_hub.add_repo("org/xet", {"config.json": CONFIG, "model.safetensors": weights})

    path = Path(snapshot_download("org/xet"))

    assert (path / "model.safetensors").read_bytes() == weights
    counters = local_hub.counters()
    weight = f"/org/xet/resolve/{commit}/model.safetensors"
    by_origin = {o: [r for r in counters.records if r.origin == o] for o in ("hub", "cdn", "cas")}
    assert counters.request_count("/api/models/org/xet/revision/main") == 1
    assert counters.request_count("/api/models/org/xet/tree/*") == 1
    assert counters.request_count("*/resolve/*/config.json", method="HEAD") == 1
    assert counters.request_count("*/resolve/*/config.json", method="GET") == 1
    if transport == "http":
        # Plain HTTP: HEAD and GET on /resolve answer 302, the CDN serves the bytes; no Xet at all.
        assert [(r.method, r.status) for r in by_origin["hub"] if r.path == weight] == [("HEAD", 302), ("GET", 302)]
        assert [(r.method, r.status, r.aliases) for r in by_origin["cdn"]] == [("GET", 200, (weight,))]
        assert by_origin["cas"] == []
        assert counters.request_count("*/xet-read-token/*") == 0
    else:
        # Xet: the listing carries the xet hash, so no HEAD for the weights; one token, then the CAS.
        assert [r for r in by_origin["hub"] if r.path == weight] == []
        assert by_origin["cdn"] == []
        assert counters.request_count("*/xet-read-token/*") == 1
        assert [(r.path.split("/")[1:3], r.status) for r in by_origin["cas"][:1]] == [(["v2", "reconstructions"], 200)]
        assert {r.path.split("/")[1] for r in by_origin["cas"][1:]} == {"xorbs"}
        assert all(r.aliases == (weight,) for r in by_origin["cas"])
    assert len(weights) <= counters.served(weight) < len(weights) + 64 * 1024
    assert counters.bytes_served == local_hub.bytes_served == sum(r.body_bytes for r in counters.records)
    assert local_hub.cache_dir is not None
    blob = blob_dir(local_hub.cache_dir, "org/xet") / sha256(weights)
    if transport == "xet":
        xet_hash = xet_hash_of("org/xet", "model.safetensors")
        store = local_hub.cache_dir / "blobs" / xet_hash[:2] / xet_hash
        assert blob.is_symlink() and not Path(os.readlink(blob)).is_absolute()
        assert blob.resolve() == store
    else:
        assert blob.is_file() and not blob.is_symlink()
    assert not list(local_hub.cache_dir.rglob("*.incomplete"))


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_hf_hub_download_on_a_branch_reads_the_redirect(hub: LocalHub, transport: str) -> None:
    path = Path(hf_hub_download("org/tiny", "model.safetensors"))

    assert path.read_bytes() == WEIGHTS
    resolve = "/org/tiny/resolve/main/model.safetensors"
    assert hub.request_count(resolve, method="HEAD", status=302) == 1
    if transport == "http":
        assert hub.request_count(resolve, method="GET", status=302) == 1
        assert hub.request_count("/cdn/*", method="GET", status=200) == 1
        assert hub.request_count("*/reconstructions/*") == 0
    else:
        assert hub.request_count(resolve, method="GET") == 0
        assert hub.request_count("/cdn/*") == 0
        assert hub.request_count("*/xet-read-token/*") == 1
        assert hub.request_count("/v2/reconstructions/*", status=200) == 1


@pytest.mark.transports("xet")
def test_cas_without_v2_makes_the_client_fall_back_to_v1(hub: LocalHub) -> None:
    hub.cas_v2 = False

    path = Path(snapshot_download("org/tiny"))

    assert (path / "model.safetensors").read_bytes() == WEIGHTS
    assert [(p.split("/")[1], s) for _, p, s in hub.requests if "/reconstructions/" in p] == [("v2", 404), ("v1", 200)]
    assert hub.request_count("/xorbs/*", status=206) >= 1


@pytest.mark.transports("xet")
def test_the_same_bytes_in_many_repos_are_stored_once_and_served_to_each(local_hub: LocalHub) -> None:
    weights = os.urandom(200_000)
    for n in range(3):
        local_hub.add_repo(f"org/copy{n}", {"model.safetensors": weights, "config.json": str(n)})

    hashes = {xet_hash_of(f"org/copy{n}", "model.safetensors") for n in range(3)}
    paths = [Path(hf_hub_download(f"org/copy{n}", "model.safetensors")) for n in range(3)]

    assert len(hashes) == 1
    assert all(p.read_bytes() == weights for p in paths)
    # Each repo's download is for its own file; the shared store downloads the bytes once.
    assert [local_hub.request_count(f"/org/copy{n}/resolve/*/model.safetensors", method="HEAD") for n in range(3)] == [
        1,
        1,
        1,
    ]
    assert local_hub.request_count("*/reconstructions/*") == 1


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_an_empty_lfs_file(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/empty", {"empty.bin": b"", "config.json": CONFIG})

    path = Path(snapshot_download("org/empty"))

    assert (path / "empty.bin").read_bytes() == b""


@pytest.mark.local_hub(xet_token_ttl=1)
@pytest.mark.transports("xet")
def test_short_lived_cas_tokens_are_refreshed_and_an_expired_one_is_refused(local_hub: LocalHub) -> None:
    files = {name: random.Random(name).randbytes(100_000) for name in ("a.safetensors", "b.safetensors")}
    commit = local_hub.add_repo("org/slow", files)
    session = get_session()
    first = session.get(f"{local_hub.url}/api/models/org/slow/xet-read-token/{commit}")
    assert first.headers["X-Xet-Access-Token"] == first.json()["accessToken"]
    assert first.headers["X-Xet-Cas-Url"] == first.json()["casUrl"] == local_hub.cas_url
    expires = int(first.headers["X-Xet-Token-Expiration"])
    local_hub.reset_counters()
    # Slow enough that the files, fetched one after the other, take longer than a token lives.
    local_hub.slow(70_000)

    started = time.time()
    path = Path(snapshot_download("org/slow", max_workers=1))

    assert time.time() - started > 2
    assert all((path / name).read_bytes() == data for name, data in files.items())
    # huggingface_hub asks once per file (its cache drops tokens expiring within 60 s); hf_xet
    # refreshes on top of that before a CAS call when the token expires within ~30 s.
    assert local_hub.request_count("*/xet-read-token/*", status=200) > len(files)
    assert [s for _, p, s in local_hub.requests if "/reconstructions/" in p] == [200] * len(files)
    # The CAS refuses a token past its expiry with 401 (hf_xet does not retry that: it refreshes ahead).
    local_hub.slow(None)
    time.sleep(max(0.0, expires - time.time()) + 0.05)
    xet_hash = xet_hash_of("org/slow", "a.safetensors")
    expired = session.get(
        f"{local_hub.cas_url}/v2/reconstructions/{xet_hash}",
        headers={"Authorization": f"Bearer {first.json()['accessToken']}"},
    )
    assert expired.status_code == 401
    assert "expired" in expired.headers["X-Error-Message"]


# -- Xet storage: the fault plan on the CDN, the token route and the CAS ------------------------


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_a_fault_for_a_file_reaches_it_on_whatever_origin_serves_it(
    hub: LocalHub, transport: str, client_sleeps: list[float]
) -> None:
    commit = HfApi().model_info("org/tiny").sha
    # The commit form: never the own path of the /resolve/main requests hf_hub_download sends.
    pattern = f"/org/tiny/resolve/{commit}/model.safetensors"
    hub.fail(pattern, 429)

    path = Path(hf_hub_download("org/tiny", "model.safetensors"))

    assert path.read_bytes() == WEIGHTS
    failed = [r for r in hub.counters().records if r.status == 429]
    assert [r.origin for r in failed] == ["cdn" if transport == "http" else "cas"]
    assert failed[0].path != pattern
    assert failed[0].aliases == (pattern,)
    assert hub.pending_faults() == []
    assert hub.request_count(pattern, status=429) == 1


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_a_glob_on_the_file_name_fails_it_on_every_transport(hub: LocalHub, client_sleeps: list[float]) -> None:
    hub.fail("*model.safetensors", 503)

    path = Path(snapshot_download("org/tiny"))

    assert (path / "model.safetensors").read_bytes() == WEIGHTS
    assert hub.pending_faults() == []
    assert hub.request_count("*model.safetensors", status=503) == 1


XET_FAULTS = {
    "token-route-fail": ("fail", "*/xet-read-token/*", "hub"),
    "token-route-cut": ("cut", "*/xet-read-token/*", "hub"),
    "reconstruction-fail": ("fail", "*/reconstructions/*", "cas"),
    "xorb-fail": ("fail", "/xorbs/*", "cas"),
    "reconstruction-cut": ("cut", "*/reconstructions/*", "cas"),
    "xorb-cut": ("cut", "/xorbs/*", "cas"),
    "reconstruction-corrupt": ("corrupt", "*/reconstructions/*", "cas"),
}


@pytest.mark.transports("xet")
@pytest.mark.parametrize("case", sorted(XET_FAULTS))
def test_one_fault_on_the_xet_path_is_retried(local_hub: LocalHub, case: str, client_sleeps: list[float]) -> None:
    weights = random.Random(case).randbytes(300_000)
    local_hub.add_repo("org/x", {"model.safetensors": weights})
    kind, pattern, origin = XET_FAULTS[case]
    if kind == "fail":
        local_hub.fail(pattern, 500)
    elif kind == "cut":
        local_hub.cut(pattern, 10)
    else:
        local_hub.corrupt(pattern)

    path = Path(hf_hub_download("org/x", "model.safetensors"))

    assert path.read_bytes() == weights
    assert local_hub.pending_faults() == []
    hits = [r for r in local_hub.counters().records if r.matches(pattern)]
    assert len(hits) == 2 and {r.origin for r in hits} == {origin}
    if kind == "cut":
        assert hits[0].body_bytes == 10
    # huggingface_hub retries the token route after its own backoff; hf_xet retries the CAS itself.
    assert client_sleeps == ([1] if origin == "hub" else [])


@pytest.mark.transports("http")
@pytest.mark.parametrize("kind", ["fail", "cut", "corrupt"])
def test_one_fault_on_the_cdn(local_hub: LocalHub, kind: str, client_sleeps: list[float]) -> None:
    weights = random.Random(kind).randbytes(300_000)
    local_hub.add_repo("org/x", {"model.safetensors": weights})
    if kind == "fail":
        local_hub.fail("/cdn/*", 429)
    elif kind == "cut":
        local_hub.cut("/cdn/*", 1000)
    else:
        local_hub.corrupt("/cdn/*")

    data = Path(hf_hub_download("org/x", "model.safetensors")).read_bytes()

    cdn = [(r.method, r.status, r.body_bytes) for r in local_hub.counters().records if r.origin == "cdn"]
    assert local_hub.pending_faults() == []
    if kind == "corrupt":  # the plain-HTTP path checks the length only
        assert sum(a != b for a, b in zip(data, weights, strict=True)) == 1
        assert cdn == [("GET", 200, len(weights))]
    else:  # retried by huggingface_hub: again from /resolve, which redirects to the CDN again
        assert data == weights
        refused = ("GET", 429, cdn[0][2]) if kind == "fail" else ("GET", 200, 1000)  # an error body, or the cut
        assert cdn == [refused, ("GET", 200, len(weights))]
        assert local_hub.request_count("/org/x/resolve/main/model.safetensors", method="GET", status=302) == 2
        assert client_sleeps == [1]


@SERVER
def test_reconstructions_honour_range(hub: LocalHub) -> None:
    weights = random.Random(5).randbytes(400_000)  # several chunks of about 64 KiB
    commit = hub.add_repo("org/r", {"model.safetensors": weights})
    xet_hash = xet_hash_of("org/r", "model.safetensors")
    token = get_session().get(f"{hub.url}/api/models/org/r/xet-read-token/{commit}").json()["accessToken"]
    session = get_session()

    def reconstruction(version: int, span: str | None) -> HTTP.Response:
        headers = {"Authorization": f"Bearer {token}", **({"Range": span} if span else {})}
        return session.get(f"{hub.cas_url}/v{version}/reconstructions/{xet_hash}", headers=headers)

    whole = reconstruction(2, None).json()
    part = reconstruction(2, "bytes=100000-100099").json()
    old = reconstruction(1, "bytes=100000-100099").json()

    assert sum(t["unpacked_length"] for t in whole["terms"]) == len(weights)
    assert whole["offset_into_first_range"] == 0
    assert 0 < sum(t["unpacked_length"] for t in part["terms"]) < len(weights)
    assert 0 < part["offset_into_first_range"] <= 100_000
    assert set(part["xorbs"]) == {t["hash"] for t in part["terms"]}
    assert old["terms"] == part["terms"] and set(old["fetch_info"]) == set(part["xorbs"])
    # A xorb range handed out reads back as that many bytes, without a token.
    (fetch,) = part["xorbs"][part["terms"][0]["hash"]]
    first, last = fetch["ranges"][0]["bytes"]["start"], fetch["ranges"][0]["bytes"]["end"]
    xorb = session.get(fetch["url"], headers={"Range": f"bytes={first}-{last}"})
    assert (xorb.status_code, len(xorb.content)) == (206, last - first + 1)
    assert reconstruction(2, f"bytes={len(weights)}-").status_code == 416
    assert reconstruction(2, None).status_code == 200
    assert (
        session.get(
            f"{hub.cas_url}/v2/reconstructions/{'0' * 63}1", headers={"Authorization": f"Bearer {token}"}
        ).status_code
        == 404
    )
    # Reconstructions and xorb fetches count as the file's resolve path too.
    assert hub.request_count(f"/org/r/resolve/{commit}/model.safetensors") == 6


@pytest.mark.transports("xet")
def test_a_corrupted_xorb_is_written_as_is(local_hub: LocalHub) -> None:
    weights = random.Random(3).randbytes(300_000)  # incompressible: xorb chunks hold the bytes as they are
    local_hub.add_repo("org/x", {"model.safetensors": weights})
    local_hub.corrupt("/xorbs/*")

    path = Path(hf_hub_download("org/x", "model.safetensors"))

    data = path.read_bytes()
    assert len(data) == len(weights)
    assert sum(a != b for a, b in zip(data, weights, strict=True)) == 1
    # hf_xet does not check the file against its hashes; the blob is named after the hash it lacks.
    assert path.resolve().name == xet_hash_of("org/x", "model.safetensors")
    assert local_hub.request_count("/xorbs/*") == 1


@pytest.mark.transports("xet")
def test_a_persistent_cas_failure_surfaces_with_no_http_fallback(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/x", {"model.safetensors": WEIGHTS})
    local_hub.fail("*/reconstructions/*", 503, times=20)
    code = "import huggingface_hub as h; h.hf_hub_download('org/x', 'model.safetensors')"
    # hf_xet's own retry policy (5 tries over minutes by default), shortened for the child.
    env = {**os.environ, "HF_XET_CLIENT_RETRY_BASE_DELAY": "10ms", "HF_XET_CLIENT_RETRY_MAX_ATTEMPTS": "2"}

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)

    assert done.returncode != 0
    assert "503" in done.stderr
    tries = local_hub.request_count("*/reconstructions/*", status=503)
    assert tries >= 2
    assert local_hub.pending_faults() == [("fail", "*/reconstructions/*", 20 - tries)]
    assert local_hub.request_count("/cdn/*") == local_hub.request_count("/xorbs/*") == 0


# -- fault plan: fail ------------------------------------------------------------------------


@SERVER
def test_fail_on_revision_is_not_retried_by_the_client(hub: LocalHub) -> None:
    hub.fail("*/revision/*", 500)

    with pytest.raises(LocalEntryNotFoundError) as raised:
        snapshot_download("org/tiny")

    assert isinstance(raised.value.__cause__, HfHubHTTPError)
    assert raised.value.__cause__.response.status_code == 500
    assert hub.requests == [("GET", "/api/models/org/tiny/revision/main", 500)]
    assert hub.pending_faults() == []
    assert Path(snapshot_download("org/tiny")).is_dir()


@plain_storage
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


@plain_storage
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


@SERVER
def test_429_retry_after_is_honoured(hub: LocalHub, client_sleeps: list[float]) -> None:
    hub.fail("*config.json", 429, times=2, retry_after=3)

    assert Path(hf_hub_download("org/tiny", "config.json")).read_text() == CONFIG

    assert [s for _, _, s in hub.requests] == [429, 429, 200, 200]
    # The client waits Retry-After + 1 s before its retry.
    assert client_sleeps == [4.0]
    response = get_session().head(hf_hub_url("org/tiny", "config.json"))
    assert response.status_code == 200


@SERVER
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


@plain_storage
def test_fail_with_method_and_error_code(hub: LocalHub, client_sleeps: list[float]) -> None:
    hub.fail("*model.safetensors", 403, method="GET", error_code="GatedRepo")

    with pytest.raises(GatedRepoError):
        hf_hub_download("org/tiny", "model.safetensors")

    assert [(m, s) for m, _, s in hub.requests] == [("HEAD", 200), ("GET", 403)]


@SERVER
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


@plain_storage
def test_cut_once_is_retried_by_the_client(hub: LocalHub, client_sleeps: list[float]) -> None:
    hub.cut("*model.safetensors", 1000)

    path = Path(hf_hub_download("org/tiny", "model.safetensors"))

    assert path.read_bytes() == WEIGHTS
    # The HEAD carries no body, so the cut waited for the GET. The client reads 10 MB chunks and
    # counts only whole ones, so the 1000 bytes it got are dropped and it starts over without Range.
    assert [(m, s) for m, _, s in hub.requests] == [("HEAD", 200), ("GET", 200), ("GET", 200)]
    assert hub.served("/org/tiny/resolve/main/model.safetensors") == 1000 + len(WEIGHTS)
    assert client_sleeps == [1]


@plain_storage
def test_cut_beyond_the_client_retries_raises_a_protocol_error(hub: LocalHub, client_sleeps: list[float]) -> None:
    hub.cut("*model.safetensors", 100, times=10)

    with pytest.raises(HTTP.RemoteProtocolError):
        hf_hub_download("org/tiny", "model.safetensors")

    # The first GET and 5 retries, each cut after 100 bytes.
    assert hub.request_count(method="GET") == 6
    assert hub.served("/org/tiny/resolve/main/model.safetensors") == 600
    assert hub.pending_faults() == [("cut", "*model.safetensors", 4)]
    assert hub.cache_dir is not None
    leftovers = [p.name for p in blob_dir(hub.cache_dir, "org/tiny").iterdir()]
    assert all(name.endswith(".incomplete") for name in leftovers)


@SERVER
def test_cut_json_endpoint(hub: LocalHub) -> None:
    hub.cut("*/revision/*", 5)

    with pytest.raises(Exception) as raised:
        snapshot_download("org/tiny")

    chain = [raised.value, raised.value.__cause__, raised.value.__context__]
    assert any(isinstance(e, HTTP.RemoteProtocolError) for e in chain)
    assert hub.served("/api/models/org/tiny/revision/main") == hub.bytes_served == 5


@SERVER
def test_cut_beyond_the_body_still_withholds_its_last_byte(hub: LocalHub) -> None:
    # A tiny file (or one Xet compresses to a few bytes) is still cut short, not sent whole.
    hub.cut("*config.json", 1000)

    with pytest.raises(HTTP.RemoteProtocolError):
        get_session().get(hf_hub_url("org/tiny", "config.json"))

    assert hub.served("*config.json") == len(CONFIG) - 1
    assert hub.pending_faults() == []


@plain_storage
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


@plain_storage
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
    local_hub.reset_counters()
    snapshot_download("org/slow", force_download=True)
    # Pacing off: the bytes go out again in full (no wall-clock bound: the machine may be loaded).
    assert local_hub.served("*.bin") == 12_000


@SERVER
def test_slow_each_caps_every_body_on_its_own(hub: LocalHub) -> None:
    session = get_session()
    location = session.head(hf_hub_url("org/tiny", "model.safetensors"), follow_redirects=False).headers["Location"]
    hub.slow_each(2_000)  # 3072 bytes each: about 1.5 s, however many bodies run at once

    started = time.monotonic()
    threads = [threading.Thread(target=session.get, args=(location,)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started

    # Six bodies sharing one budget would take 9.2 s: the bound leaves a loaded machine 4x slack.
    assert 1.2 <= elapsed < 6.0
    assert hub.served("/cdn/*") == 6 * len(WEIGHTS)
    hub.clear_faults()
    hub.reset_counters()
    session.get(location)
    assert hub.served("/cdn/*") == len(WEIGHTS)


# -- rate limit ---------------------------------------------------------------------------


@SERVER
def test_rate_limit_answers_like_the_hub_once_the_window_is_spent(hub: LocalHub) -> None:
    # A bare client: the plugin's gate (active in this test session) would hold the requests back.
    url = f"{hub.url}/api/models/org/tiny/revision/main"
    hub.rate_limit(2, 30, pattern="*/revision/*")
    with HTTP.Client() as client:
        statuses = [client.get(url).status_code for _ in range(3)]
        refused = client.get(url)
        other = client.get(f"{hub.url}/api/models/org/tiny/tree/main")

    assert statuses == [200, 200, 429]
    assert refused.status_code == 429
    reset = int(refused.headers["Retry-After"])
    assert 28 <= reset <= 30
    assert refused.headers["RateLimit"] == f'"api";r=0;t={reset}'
    assert refused.headers["RateLimit-Policy"] == '"fixed window";"api";q=2;w=30'
    info = _http.parse_ratelimit_headers(refused.headers)
    assert info is not None and (info.remaining, info.limit, info.window_seconds) == (0, 2, 30)
    assert other.status_code == 200  # outside the pattern
    assert hub.request_count("*/revision/*", status=429) == 2


@SERVER
def test_rate_limit_window_resets_and_clear_faults_lifts_it(hub: LocalHub) -> None:
    url = f"{hub.url}/api/models/org/tiny/revision/main"
    hub.rate_limit(1, 0.3)
    with HTTP.Client() as client:
        opened = time.monotonic()
        assert [client.get(url).status_code for _ in range(2)] == [200, 429]
        # Refused until the window has run out (refused requests count, and do not move it).
        while (status := client.get(url).status_code) == 429:
            assert time.monotonic() - opened < 30, "the window never reset"
            time.sleep(0.01)
        assert status == 200 and time.monotonic() - opened >= 0.3
        assert client.get(url).status_code == 429
        hub.clear_faults()
        assert client.get(url).status_code == 200
    with pytest.raises(ValueError, match="limit"):
        hub.rate_limit(0, 10)
    with pytest.raises(ValueError, match="window"):
        hub.rate_limit(1, 0)


@SERVER
def test_rate_limit_counts_cas_and_cdn_requests_by_their_file_alias(hub: LocalHub) -> None:
    hub.rate_limit(1, 30, pattern="*model.safetensors")
    with HTTP.Client() as client:
        location = client.head(hf_hub_url("org/tiny", "model.safetensors")).headers["Location"]
        assert client.get(location).status_code == 429  # the CDN copy of the same file

    assert hub.request_count("*model.safetensors", status=429) == 1


@SERVER
def test_requests_carry_the_time_they_arrived(hub: LocalHub) -> None:
    before = time.time()
    with HTTP.Client() as client:
        client.get(f"{hub.url}/api/models/org/tiny/revision/main")
        client.get(f"{hub.url}/api/models/org/tiny/tree/main")
    after = time.time()

    first, second = hub.counters().records
    assert before <= first.at <= second.at <= after
    assert hub.requests[0] == ("GET", "/api/models/org/tiny/revision/main", 200)


# -- counters -------------------------------------------------------------------------------


@plain_storage
def test_requests_and_bytes_served_are_exact(hub: LocalHub) -> None:
    commit = Path(snapshot_download("org/tiny")).name

    resolve = [(m, p) for m, p, _ in hub.requests if "/resolve/" in p]
    expected = sorted((m, f"/org/tiny/resolve/{commit}/{name}") for name in FILES for m in ("HEAD", "GET"))
    assert sorted(resolve) == expected
    assert hub.requests[0] == ("GET", "/api/models/org/tiny/revision/main", 200)
    assert hub.request_count("/api/models/org/tiny/tree/*") == 1
    assert len(hub.requests) == 2 + 2 * len(FILES)
    for name, content in FILES.items():
        assert hub.served(f"/org/tiny/resolve/{commit}/{name}") == size_of(content)
    assert hub.served("/api/models/org/tiny/revision/main") > 0
    assert hub.served("/org/tiny/resolve/*") == sum(size_of(c) for c in FILES.values())
    assert hub.bytes_served == hub.served("*") == hub.served("/api/*") + hub.served("/org/tiny/resolve/*")

    hub.reset_counters()
    assert (hub.requests, hub.bytes_served) == ([], 0)


@SERVER
def test_error_bodies_are_counted(local_hub: LocalHub) -> None:
    response = get_session().get(f"{local_hub.url}/api/models/org/none/revision/main")

    assert response.status_code == 401
    assert local_hub.served("/api/models/org/none/revision/main") == len(response.content) > 0
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
    with pytest.raises(ValueError):
        LocalHub(xet_token_ttl=0)


def test_xet_needs_hf_xet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hf_xet", None)  # import hf_xet now raises ImportError

    with pytest.raises(ImportError, match="hf_xet"):
        LocalHub(xet=True)
    assert not LocalHub().xet
    assert not LocalHub(xet=False).xet


def test_a_restarted_hub_serves_its_xet_files_again(tmp_path: Path) -> None:
    weights = os.urandom(50_000)
    hub = LocalHub()
    hub.add_repo("org/r", {"model.safetensors": weights})  # before start: uploaded all the same
    for round_ in range(2):  # stop() removes the CAS folder; start() puts the files back
        with hub, hub.configure_client(tmp_path / f"cache{round_}"):
            assert Path(hf_hub_download("org/r", "model.safetensors")).read_bytes() == weights
            assert hub.request_count("*/reconstructions/*", status=200) == 1
        hub.reset_counters()


@pytest.fixture
def two_hubs(tmp_path: Path) -> Iterator[tuple[LocalHub, LocalHub]]:
    with LocalHub() as first, LocalHub() as second:
        yield first, second


def test_hubs_are_independent(two_hubs: tuple[LocalHub, LocalHub], tmp_path: Path) -> None:
    first, second = two_hubs
    first.add_repo("org/r", {"config.json": "first", "model.safetensors": b"first"})
    second.add_repo("org/r", {"config.json": "second", "model.safetensors": b"second"})

    assert first.url != second.url
    assert first.token != second.token
    assert first.cas_url != second.cas_url
    for hub, content in ((first, "first"), (second, "second")):
        with hub.configure_client(tmp_path / content):
            assert Path(hf_hub_download("org/r", "config.json")).read_text() == content
            assert Path(hf_hub_download("org/r", "model.safetensors")).read_text() == content


@SERVER
def test_wait_idle_waits_for_a_paced_body_and_times_out_naming_it(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/paced", {"data.txt": b"x" * 300_000})
    url = f"{local_hub.url}/org/paced/resolve/main/data.txt"
    local_hub.slow(1_000_000)  # 0.3 s of body
    reader = threading.Thread(target=lambda: HTTP.get(url, timeout=30))
    reader.start()
    _wait_for(lambda: local_hub.served("*data.txt") > 0)
    with pytest.raises(TimeoutError, match="still answering"):
        local_hub.wait_idle(timeout=0.01)
    reader.join()
    local_hub.wait_idle()
    assert local_hub.served("*data.txt") == 300_000


@SERVER
def test_wait_idle_after_a_client_dies_mid_body_leaves_counters_that_do_not_move(local_hub: LocalHub) -> None:
    body = b"y" * 400_000
    local_hub.add_repo("org/paced", {"data.txt": body})
    host, port = urlsplit(local_hub.url).hostname, urlsplit(local_hub.url).port
    local_hub.slow(2_000_000)
    with socket.create_connection((host, port)) as client:
        client.sendall(b"GET /org/paced/resolve/main/data.txt HTTP/1.1\r\nHost: hub\r\n\r\n")
        client.recv(4096)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset, as a kill leaves
    local_hub.wait_idle()
    cut_short = local_hub.served("*data.txt")
    assert cut_short < len(body)
    local_hub.slow(None)
    assert HTTP.get(f"{local_hub.url}/org/paced/resolve/main/data.txt", timeout=30).content == body
    local_hub.wait_idle()
    # Only the second response was added: nothing of the dead client's was counted after wait_idle.
    assert local_hub.served("*data.txt") == cut_short + len(body)


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.002)
