"""huggingface_hub's private names, pinned on the installed release: each access of ``core._hf_compat``
exists and behaves as the package uses it, its fallback does what it says, and no other module of
the package reaches one.

When a huggingface_hub release renames or changes one of them, a test here fails naming it.
"""

from __future__ import annotations

import ast
import importlib
import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import huggingface_hub
import huggingface_hub.constants as constants
import pytest

from pytest_hfsnapshot import materialize
from pytest_hfsnapshot.core import _hf_compat
from pytest_hfsnapshot.core.cache import layout
from pytest_hfsnapshot.core.cache.layout import RepoCache
from pytest_hfsnapshot.testing.hub import LocalHub

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_hfsnapshot"
COMPAT = PACKAGE / "core" / "_hf_compat.py"
MAJOR = int(huggingface_hub.__version__.split(".")[0])
COMMIT = "c" * 40
XET_HASH = "d" * 64
FILES: dict[str, dict[str, Any]] = {
    "config.json": {"size": 2, "blob_id": "b" * 40},
    "model.safetensors": {
        "size": 10,
        "blob_id": "e" * 40,
        "lfs_sha256": "a" * 64,
        "lfs_size": 10,
        "xet_hash": XET_HASH,
    },
}
# A dotted path into huggingface_hub with a private part: `huggingface_hub.utils._http`, `..._tree_cache`.
_PRIVATE_PATH = re.compile(r"^huggingface_hub(\.\w+)*\._\w+")
# Private attributes of public modules, and public names of private modules, the compat module reads.
_PRIVATE_ATTRIBUTES = {
    "_GLOBAL_CLIENT_FACTORY",
    "_HUB_ORIGINS",
    "_url_origin",
    "_staging_mode",
    "_hf_hub_download_to_cache_dir",
}
_NAMES_OF_PRIVATE_MODULES = {"XET_CONNECTION_INFO_CACHE", "TreeCacheEntry", "has_shared_blob", "shared_blobs_enabled"}


def private_reaches(path: Path) -> list[str]:
    """Where a module reaches a private name of huggingface_hub: imports, module paths, attribute names."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _PRIVATE_PATH.match(alias.name)]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("huggingface_hub"):
            module = node.module or ""
            if _PRIVATE_PATH.match(module):
                found.append(module)
            found += [f"{module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _PRIVATE_PATH.match(node.value) or node.value in _PRIVATE_ATTRIBUTES | _NAMES_OF_PRIVATE_MODULES:
                found.append(node.value)
        elif isinstance(node, ast.Attribute) and node.attr in _PRIVATE_ATTRIBUTES | _NAMES_OF_PRIVATE_MODULES:
            found.append(node.attr)
    return found


def test_only_the_compat_module_reaches_huggingface_hubs_private_names() -> None:
    reaching = {
        str(path.relative_to(PACKAGE)): names
        for path in sorted(PACKAGE.rglob("*.py"))
        if (names := private_reaches(path))
    }
    assert set(reaching) == {"core/_hf_compat.py"}, reaching
    # The check sees each kind of reach (it would pass vacuously otherwise).
    assert {"huggingface_hub._tree_cache", "huggingface_hub.utils._http", "_GLOBAL_CLIENT_FACTORY"} <= set(
        reaching["core/_hf_compat.py"]
    )


def test_the_check_sees_imports_of_private_names(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from huggingface_hub.utils import _http\nimport huggingface_hub._tree_cache\n"
        "from huggingface_hub.file_download import _download_to_tmp_and_move\n"
        "from huggingface_hub import constants\nx = constants._staging_mode\n"
    )
    assert sorted(private_reaches(module)) == [
        "_staging_mode",
        "huggingface_hub._tree_cache",
        "huggingface_hub.file_download._download_to_tmp_and_move",
        "huggingface_hub.utils._http",
    ]


@pytest.fixture
def warned(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Fallback warnings of this test, each said again (they are said once per process)."""
    monkeypatch.setattr(_hf_compat, "_warned", set())
    caplog.set_level(logging.WARNING, logger="pytest_hfsnapshot")
    return caplog


def hide_module(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make ``import name`` fail as on a release without that module."""
    monkeypatch.setitem(sys.modules, name, None)


def says_missing(caplog: pytest.LogCaptureFixture, name: str) -> bool:
    return any(f"huggingface_hub {huggingface_hub.__version__} has no {name}" in r.getMessage() for r in caplog.records)


# --- the tree cache -------------------------------------------------------------------------------


def test_the_client_listing_cache_is_there_and_keeps_its_documented_format(tmp_path: Path) -> None:
    client = _hf_compat.client_listing_cache()
    assert client is not None, f"huggingface_hub {huggingface_hub.__version__} has no usable _tree_cache"
    client.write(tmp_path, COMMIT, FILES)
    on_disk = json.loads((tmp_path / "trees" / f"{COMMIT}.json").read_text())
    # The format layout's fallback writes by hand, and listing.parse reads.
    assert on_disk == {"format_version": layout.TREE_CACHE_FORMAT, "files": FILES}
    assert client.read(tmp_path, COMMIT) == FILES
    assert client.read(tmp_path, "f" * 40) is None


def test_the_fallback_writes_what_the_client_reads_and_reads_what_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = _hf_compat.client_listing_cache()
    assert client is not None
    repo = RepoCache(tmp_path, "org/x", "model")
    with monkeypatch.context() as patched:
        patched.setattr(layout, "client_listing_cache", lambda: None)
        repo.listings.write(COMMIT, FILES)
        assert repo.listings.read(COMMIT) == FILES
    assert client.read(repo.root, COMMIT) == FILES  # the client reads the hand-written file
    other = "9" * 40
    client.write(repo.root, other, FILES)
    monkeypatch.setattr(layout, "client_listing_cache", lambda: None)
    assert repo.listings.read(other) == FILES  # and the fallback reads the client's


def test_a_release_without_the_tree_cache_falls_back_and_says_so(
    monkeypatch: pytest.MonkeyPatch, warned: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    hide_module(monkeypatch, _hf_compat.TREE_CACHE_MODULE)
    assert _hf_compat.client_listing_cache() is None
    assert says_missing(warned, "huggingface_hub._tree_cache")
    repo = RepoCache(tmp_path, "org/x", "model")
    repo.listings.write(COMMIT, FILES)
    assert repo.listings.read(COMMIT) == FILES


# --- the shared blob store ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("disable_shared", "disable_xet", "enabled"), [(False, False, True), (True, False, False), (False, True, False)]
)
def test_the_shared_store_follows_the_clients_switches(
    monkeypatch: pytest.MonkeyPatch, disable_shared: bool, disable_xet: bool, enabled: bool
) -> None:
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_SHARED_BLOBS", disable_shared)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", disable_xet)
    assert _hf_compat.shared_store_enabled() is enabled


@pytest.mark.transports("xet")
def test_the_store_test_and_the_xet_token_cache_behave_as_used(local_hub: LocalHub) -> None:
    if not local_hub.xet:
        pytest.skip("hf_xet is not installed: no shared store, no Xet token")
    weights = bytes(range(256)) * 64
    local_hub.add_repo("org/stored", {"config.json": "{}", "model.safetensors": weights})
    snap = materialize("org/stored")
    entry = RepoCache(local_hub.cache_dir, "org/stored", "model").listings.read(snap.commit)
    assert entry is not None
    xet_hash = entry["model.safetensors"]["xet_hash"]
    cache = Path(local_hub.cache_dir)
    assert _hf_compat.has_shared_blob(cache, xet_hash, len(weights)) is True
    assert _hf_compat.has_shared_blob(cache, xet_hash, len(weights) + 1) is False
    assert _hf_compat.has_shared_blob(cache, "0" * 64, len(weights)) is False
    # The download fetched a Xet token, kept where forget_xet_tokens drops it.
    tokens = importlib.import_module(_hf_compat.XET_MODULE).XET_CONNECTION_INFO_CACHE
    assert isinstance(tokens, dict) and tokens
    _hf_compat.forget_xet_tokens()
    assert tokens == {}


def test_a_release_without_the_store_module_counts_nothing_as_stored(
    monkeypatch: pytest.MonkeyPatch, warned: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    hide_module(monkeypatch, _hf_compat.SHARED_BLOBS_MODULE)
    assert _hf_compat.shared_store_enabled() is False
    assert _hf_compat.has_shared_blob(tmp_path, XET_HASH, 10) is False
    assert says_missing(warned, "huggingface_hub.utils._shared_blobs.shared_blobs_enabled")
    assert says_missing(warned, "huggingface_hub.utils._shared_blobs.has_shared_blob")


# --- the HTTP client ------------------------------------------------------------------------------


def test_the_factory_in_place_is_what_set_client_factory_set() -> None:
    before = _hf_compat.client_factory_in_place()
    http = importlib.import_module(_hf_compat.HTTP_MODULE)

    def mine() -> Any:
        return http.default_client_factory()

    huggingface_hub.set_client_factory(mine)
    try:
        assert _hf_compat.client_factory_in_place() is mine
        assert _hf_compat.client_factory_is(mine) and not _hf_compat.client_factory_is(before)
    finally:
        huggingface_hub.set_client_factory(before)
    assert _hf_compat.client_factory_is(before)


def test_without_the_factory_name_the_default_factory_is_used_and_said(
    monkeypatch: pytest.MonkeyPatch, warned: pytest.LogCaptureFixture
) -> None:
    http = importlib.import_module(_hf_compat.HTTP_MODULE)
    monkeypatch.delattr(http, "_GLOBAL_CLIENT_FACTORY")
    assert _hf_compat.client_factory_in_place() is http.default_client_factory
    assert says_missing(warned, "huggingface_hub.utils._http._GLOBAL_CLIENT_FACTORY")
    assert _hf_compat.client_factory_is(lambda: None)  # unreadable: taken as still ours


def test_without_any_factory_name_the_error_names_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    http = importlib.import_module(_hf_compat.HTTP_MODULE)
    monkeypatch.delattr(http, "_GLOBAL_CLIENT_FACTORY")
    monkeypatch.delattr(http, "default_client_factory")
    with pytest.raises(_hf_compat.HubCompatibilityError) as caught:
        _hf_compat.client_factory_in_place()
    message = str(caught.value)
    assert message.startswith(f"huggingface_hub {huggingface_hub.__version__} has no ")
    assert "_GLOBAL_CLIENT_FACTORY" in message and "rate-limit gate" in message


def test_http_client_loaded_tells_whether_the_http_layer_is_imported() -> None:
    code = (
        "import huggingface_hub.constants\n"
        "from pytest_hfsnapshot.core._hf_compat import http_client_loaded\n"
        "before = http_client_loaded()\n"
        "import huggingface_hub.file_download\n"
        "print(before, http_client_loaded())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


# --- pointing the client at another Hub (the testing kit) -----------------------------------------


def test_the_copies_taken_at_import_are_there_and_are_copies() -> None:
    for module_name, names in _hf_compat.IMPORT_TIME_COPIES.items():
        module = importlib.import_module(module_name)
        for name, constant in names.items():
            assert hasattr(module, name), f"{module_name}.{name} is gone"
            # Outside a local_hub test nothing is patched: the copy still holds the constant's value.
            assert getattr(module, name) == getattr(constants, constant), f"{module_name}.{name}"
    assert hasattr(constants, "_staging_mode")
    patches = _hf_compat.endpoint_patches("http://127.0.0.9:1234", hub_cache="/c", assets_cache="/a")
    patched = {(module.__name__, name): value for module, name, value in patches}
    assert patched[("huggingface_hub.constants", "_staging_mode")] is False
    assert patched[("huggingface_hub.utils._cache_manager", "HF_HUB_CACHE")] == "/c"
    assert patched[("huggingface_hub.utils._cache_assets", "HF_ASSETS_CACHE")] == "/a"
    assert patched[("huggingface_hub.utils._git_credential", "ENDPOINT")] == "http://127.0.0.9:1234"


def test_a_local_hub_becomes_a_hub_origin(monkeypatch: pytest.MonkeyPatch) -> None:
    http = importlib.import_module(_hf_compat.HTTP_MODULE)
    if MAJOR < 2:
        # 1.x follows a redirect to the same host on any port, and keeps no list of Hub origins.
        assert not hasattr(http, "_HUB_ORIGINS")
        return
    url = "http://127.0.0.9:1234"
    cdn = "http://127.0.0.8:99/some/file"
    assert not http._is_same_or_hub_host(cdn, url + "/org/x/resolve/main/a")
    for module, name, value in _hf_compat.endpoint_patches(url, hub_cache="/c", assets_cache="/a"):
        if name == "_HUB_ORIGINS":
            monkeypatch.setattr(module, name, value)
    assert http._is_same_or_hub_host(cdn, url + "/org/x/resolve/main/a")


def test_forget_xet_tokens_empties_the_clients_token_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = importlib.import_module(_hf_compat.XET_MODULE).XET_CONNECTION_INFO_CACHE
    assert isinstance(tokens, dict)
    monkeypatch.setitem(tokens, "http://hub.test/refresh", object())
    _hf_compat.forget_xet_tokens()
    assert "http://hub.test/refresh" not in tokens


def test_a_release_without_the_token_cache_says_so(
    monkeypatch: pytest.MonkeyPatch, warned: pytest.LogCaptureFixture
) -> None:
    xet = importlib.import_module(_hf_compat.XET_MODULE)
    monkeypatch.delattr(xet, "XET_CONNECTION_INFO_CACHE")
    _hf_compat.forget_xet_tokens()
    assert says_missing(warned, "huggingface_hub.utils._xet.XET_CONNECTION_INFO_CACHE")


@pytest.mark.parametrize("disable_xet", [False, True])
def test_xet_in_use_is_the_clients_own_rule(monkeypatch: pytest.MonkeyPatch, disable_xet: bool) -> None:
    runtime = importlib.import_module("huggingface_hub.utils._runtime")
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", disable_xet)
    assert _hf_compat.xet_in_use() is runtime.is_xet_available()


# --- implicit Hub use: the functions libraries bind at import, and the client's transports ---------


def test_hf_hub_download_goes_through_the_wrapped_module_global(local_hub: LocalHub) -> None:
    from huggingface_hub import hf_hub_download  # bound before the wrap, as libraries bind it

    local_hub.add_repo("org/tiny", {"config.json": "{}"})
    seen: list[dict[str, Any]] = []

    def wrap(original: Any) -> Any:
        def wrapper(**kwargs: Any) -> Any:
            seen.append(kwargs)
            return original(**kwargs)

        return wrapper

    undo = _hf_compat.wrap_download_to_cache(wrap)
    try:
        path = hf_hub_download("org/tiny", "config.json")
    finally:
        undo()
    assert [(k["repo_id"], k["filename"], k["revision"]) for k in seen] == [("org/tiny", "config.json", "main")]
    assert Path(path).read_text() == "{}"
    hf_hub_download("org/tiny", "config.json")
    assert len(seen) == 1, "undo put the original back"


def test_a_release_without_the_download_global_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.file_download as file_download

    monkeypatch.delattr(file_download, _hf_compat.DOWNLOAD_TO_CACHE)
    with pytest.raises(_hf_compat.HubCompatibilityError, match=r"file_download\._hf_hub_download_to_cache_dir"):
        _hf_compat.wrap_download_to_cache(lambda original: original)


@pytest.mark.transports("http")
def test_a_plain_http_download_streams_through_the_wrapped_http_get(local_hub: LocalHub) -> None:
    from huggingface_hub import hf_hub_download

    local_hub.add_repo("org/tiny", {"config.json": "{}", "model.safetensors": b"w" * 4096})
    seen: list[tuple[str, int | None]] = []

    def wrap(original: Any) -> Any:
        def wrapper(url: str, temp_file: Any, **kwargs: Any) -> None:
            seen.append((Path(temp_file.name).parent.name, kwargs.get("expected_size")))
            original(url, temp_file, **kwargs)

        return wrapper

    undo = _hf_compat.wrap_http_get(wrap)
    assert undo is not None
    try:
        path = hf_hub_download("org/tiny", "model.safetensors")
    finally:
        undo()
    # Into the client's own .incomplete file in the repo's blobs folder, with the size it expects.
    assert seen == [("blobs", 4096)]
    assert Path(path).read_bytes() == b"w" * 4096
    hf_hub_download("org/tiny", "config.json")
    assert len(seen) == 1, "undo put the original back"


def test_a_release_whose_http_get_takes_other_arguments_falls_back_and_says_so(
    monkeypatch: pytest.MonkeyPatch, warned: pytest.LogCaptureFixture
) -> None:
    import huggingface_hub.file_download as file_download

    monkeypatch.setattr(file_download, _hf_compat.HTTP_GET, lambda url, temp_file: None)
    assert _hf_compat.wrap_http_get(lambda original: original) is None
    assert says_missing(warned, "huggingface_hub.file_download.http_get(url, temp_file, resume_size=")


def test_try_to_load_from_cache_is_hooked_for_references_bound_before(tmp_path: Path) -> None:
    from huggingface_hub import try_to_load_from_cache  # bound before the hook, as transformers binds it

    seen: list[tuple[Any, ...]] = []

    def hook(original: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(args)
        return original(*args, **kwargs)

    undo = _hf_compat.hook_cache_lookup(hook)
    try:
        assert try_to_load_from_cache("org/tiny", "config.json", cache_dir=tmp_path) is None
    finally:
        undo()
    assert seen == [("org/tiny", "config.json")]
    try_to_load_from_cache("org/tiny", "config.json", cache_dir=tmp_path)
    assert len(seen) == 1, "undo restored the function's own code"


def test_a_release_whose_cache_lookup_is_no_plain_function_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.file_download as file_download

    monkeypatch.setattr(file_download, _hf_compat.CACHE_LOOKUP, object())
    with pytest.raises(_hf_compat.HubCompatibilityError, match=r"file_download\.try_to_load_from_cache"):
        _hf_compat.hook_cache_lookup(lambda original, *a, **k: original(*a, **k))


def test_the_clients_transports_are_wrapped() -> None:
    client = huggingface_hub.utils.get_session().__class__()  # type: ignore[attr-defined]
    wrapped: list[object] = []

    def wrap(transport: object) -> object:
        wrapped.append(transport)
        return transport

    _hf_compat.wrap_client_transports(client, wrap)
    assert wrapped and wrapped[0] is client._transport
    client.close()


def test_a_client_without_transports_names_what_is_missing() -> None:
    with pytest.raises(_hf_compat.HubCompatibilityError, match="_transport and _mounts"):
        _hf_compat.wrap_client_transports(object(), lambda transport: transport)
