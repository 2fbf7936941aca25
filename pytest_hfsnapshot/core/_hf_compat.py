"""The one door to huggingface_hub's private names: each is reached here and nowhere else.

Each access checks that the name is there with the shape we use, else falls back safely (logged
once, naming the release) or raises :class:`HubCompatibilityError`; ``tests/core/test_hf_compat.py``
pins every one on the installed release, so a rename fails there and not in a download. Imports
happen inside the functions: plugin start-up loads none of huggingface_hub's HTTP stack."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import HfSnapshotError
from ..settings import say
from .imports import after_import

log = logging.getLogger("pytest_hfsnapshot")

TREE_CACHE_MODULE = "huggingface_hub._tree_cache"
SHARED_BLOBS_MODULE = "huggingface_hub.utils._shared_blobs"
HTTP_MODULE = "huggingface_hub.utils._http"
XET_MODULE = "huggingface_hub.utils._xet"
#: Module-level copies huggingface_hub takes of its constants at import (``from ..constants import X``):
#: module -> {attribute: the constant it copies}.
IMPORT_TIME_COPIES: dict[str, dict[str, str]] = {
    "huggingface_hub.utils._cache_manager": {"HF_HUB_CACHE": "HF_HUB_CACHE"},
    "huggingface_hub.utils._cache_assets": {"HF_ASSETS_CACHE": "HF_ASSETS_CACHE"},
    "huggingface_hub.utils._git_credential": {"ENDPOINT": "ENDPOINT"},
    "huggingface_hub.cli.auth": {"ENDPOINT": "ENDPOINT"},
}

_warned: set[str] = set()


class HubCompatibilityError(HfSnapshotError):
    """The installed huggingface_hub lacks a name pytest-hfsnapshot needs and cannot do without."""


def hub_version() -> str:
    """The installed huggingface_hub's version (``huggingface_hub.__version__``)."""
    import huggingface_hub

    return str(huggingface_hub.__version__)


def hub_major() -> int:
    """The installed huggingface_hub's major version (behaviours that changed with one: see ``retry``)."""
    return int(hub_version().split(".", 1)[0])


def missing_message(name: str, used_for: str) -> str:
    """The words for a private name the installed release does not have: its version, the name, what it was for."""
    return f"huggingface_hub {hub_version()} has no {name}, which pytest-hfsnapshot uses {used_for}"


def _fall_back(name: str, used_for: str, fallback: str) -> None:
    """Say once per process that ``name`` is missing and what is done instead."""
    if name not in _warned:
        _warned.add(name)
        log.warning("hfsnapshot: %s; %s.", missing_message(name, used_for), fallback)


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _functions(module: ModuleType | None, *names: str) -> list[Callable[..., Any]] | None:
    """The named callables of ``module``, or None when the module or any of them is missing."""
    if module is None:
        return None
    found = [getattr(module, name, None) for name in names]
    return [f for f in found if callable(f)] if all(callable(f) for f in found) else None


# --- the tree cache -----------------------------------------------------------------------------


class ClientListingCache:
    """huggingface_hub's own tree-cache functions, with entries as the JSON dicts of its format.

    Going through them keeps the client's in-memory copy of the listing and its checks (valid
    Xet hashes) in step with what we write.
    """

    def __init__(self, read: Callable[..., Any], write: Callable[..., Any], entry: Any) -> None:
        self._read, self._write, self._entry = read, write, entry

    def read(self, repo_root: Path, commit: str) -> dict[str, dict[str, Any]] | None:
        """The listing of ``commit`` kept in the repo folder ``repo_root``, or None."""
        entries = self._read(str(repo_root), commit)
        return None if entries is None else {path: entry.to_json() for path, entry in entries.items()}

    def write(self, repo_root: Path, commit: str, files: Mapping[str, Mapping[str, Any]]) -> None:
        """Keep ``files`` (path -> ``{size, blob_id, lfs_sha256?, lfs_size?, xet_hash?}``) as the client does."""
        entries = {path: self._entry.from_json(dict(info)) for path, info in files.items()}
        self._write(str(repo_root), commit, entries)


def client_listing_cache() -> ClientListingCache | None:
    """The client's tree cache, or None on a release without one of that shape (callers then write
    the format of huggingface_hub 1.33 to 2.4 themselves, see ``layout.ListingCache.read``)."""
    module = _module(TREE_CACHE_MODULE)
    functions = _functions(module, "read_tree_cache", "write_tree_cache")
    entry = getattr(module, "TreeCacheEntry", None)
    if functions is None or not (callable(getattr(entry, "from_json", None)) and hasattr(entry, "to_json")):
        _fall_back(
            f"{TREE_CACHE_MODULE} (read_tree_cache, write_tree_cache, TreeCacheEntry)",
            "to read and write the client's cached listing trees/<commit>.json",
            "the listing is kept in the format of huggingface_hub 1.33 to 2.4 by hand",
        )
        return None
    return ClientListingCache(functions[0], functions[1], entry)


# --- the shared blob store ----------------------------------------------------------------------


def shared_store_enabled() -> bool:
    """Whether the client keeps Xet downloads in the shared blob store (``HF_HUB_DISABLE_SHARED_BLOBS``, ...)."""
    functions = _functions(_module(SHARED_BLOBS_MODULE), "shared_blobs_enabled")
    if functions is None:
        _fall_back(
            f"{SHARED_BLOBS_MODULE}.shared_blobs_enabled",
            "to tell whether Xet files live in the shared blob store",
            "the store is taken as not in use",
        )
        return False
    return bool(functions[0]())


def has_shared_blob(cache_dir: Path, xet_hash: str, size: int) -> bool:
    """Whether the store holds a file the client would link for ``xet_hash`` (of ``size`` bytes) instead of
    downloading it: the client's own test, which reads no content."""
    functions = _functions(_module(SHARED_BLOBS_MODULE), "has_shared_blob")
    if functions is None:
        _fall_back(
            f"{SHARED_BLOBS_MODULE}.has_shared_blob",
            "to tell whether a Xet file's bytes are already in the shared blob store",
            "such files are counted as still to fetch",
        )
        return False
    return bool(functions[0](xet_hash=xet_hash, cache_dir=cache_dir, expected_size=size))


def xet_in_use() -> bool:
    """Whether the client sends the files a listing gives a Xet hash to hf_xet: hf_xet importable and
    ``HF_HUB_DISABLE_XET`` off (the rule of huggingface_hub's private ``is_xet_available``, from public names)."""
    from huggingface_hub import constants

    return not constants.HF_HUB_DISABLE_XET and importlib.util.find_spec("hf_xet") is not None


# --- the HTTP client ----------------------------------------------------------------------------


def client_factory_in_place() -> Callable[[], Any]:
    """The factory huggingface_hub makes its HTTP client with right now (it has no public getter).

    Without ``_GLOBAL_CLIENT_FACTORY``, its ``default_client_factory`` (a user's own factory is then
    replaced while the gate is in place); without either, :class:`HubCompatibilityError`.
    """
    http = importlib.import_module(HTTP_MODULE)
    factory: Callable[[], Any] | None = getattr(http, "_GLOBAL_CLIENT_FACTORY", None)
    if callable(factory):
        return factory
    used_for = "to wrap the client factory in place with its rate-limit gate"
    default: Callable[[], Any] | None = getattr(http, "default_client_factory", None)
    if not callable(default):
        raise HubCompatibilityError(
            missing_message(f"{HTTP_MODULE}._GLOBAL_CLIENT_FACTORY nor default_client_factory", used_for)
            + ". Install a huggingface_hub release pytest-hfsnapshot supports (see its pyproject.toml), "
            "or upgrade pytest-hfsnapshot."
        )
    _fall_back(
        f"{HTTP_MODULE}._GLOBAL_CLIENT_FACTORY",
        used_for,
        "the gate wraps huggingface_hub's default factory (a factory set with set_client_factory is not kept)",
    )
    return default


def client_factory_is(factory: Callable[[], Any]) -> bool:
    """Whether ``factory`` is still the one in place (True when that cannot be read: it was ours)."""
    in_place: object = getattr(sys.modules.get(HTTP_MODULE), "_GLOBAL_CLIENT_FACTORY", factory)
    return in_place is factory


def http_client_loaded() -> bool:
    """Whether huggingface_hub's HTTP layer is imported already (a dict lookup, no import)."""
    return HTTP_MODULE in sys.modules


def close_client_session() -> None:
    """huggingface_hub's ``close_session()`` when its HTTP layer is loaded (else there is no session to close)."""
    if http_client_loaded():
        import huggingface_hub

        huggingface_hub.close_session()


# --- pointing the client at another Hub (the testing kit) ----------------------------------------


def endpoint_patches(url: str, *, hub_cache: str, assets_cache: str) -> list[tuple[ModuleType, str, Any]]:
    """The private attributes to set so that this process's huggingface_hub uses ``url`` and the caches.

    ``(module, attribute, value)`` for: the staging switch (off); the copies of ``ENDPOINT``,
    ``HF_HUB_CACHE`` and ``HF_ASSETS_CACHE`` that the modules already imported took at import; and,
    where the release has them, the Hub origins the client forwards its token to and follows
    redirects to (``url``'s origin added). A name the installed release lacks is skipped: it
    keeps no such copy.
    """
    import huggingface_hub.constants as constants

    values = {"ENDPOINT": url, "HF_HUB_CACHE": hub_cache, "HF_ASSETS_CACHE": assets_cache}
    patches: list[tuple[ModuleType, str, Any]] = []
    if hasattr(constants, "_staging_mode"):
        patches.append((constants, "_staging_mode", False))
    for module_name, names in IMPORT_TIME_COPIES.items():
        module = sys.modules.get(module_name)
        for name, constant in names.items():
            if module is not None and hasattr(module, name):
                patches.append((module, name, values[constant]))
    http = sys.modules.get(HTTP_MODULE)
    origins = getattr(http, "_HUB_ORIGINS", None)
    url_origin = getattr(http, "_url_origin", None)
    if http is not None and isinstance(origins, frozenset) and callable(url_origin):
        patches.append((http, "_HUB_ORIGINS", origins | {url_origin(url)}))
    return patches


def forget_xet_tokens() -> None:
    """Drop the Xet tokens the client cached (by refresh URL), so none outlives the Hub that issued it."""
    xet = sys.modules.get(XET_MODULE)
    if xet is None:
        return  # not loaded: no token fetched yet
    tokens = getattr(xet, "XET_CONNECTION_INFO_CACHE", None)
    if isinstance(tokens, dict):
        tokens.clear()
        return
    _fall_back(
        f"{XET_MODULE}.XET_CONNECTION_INFO_CACHE (a dict)",
        "to drop the Xet tokens of a local Hub that stopped",
        "none is dropped",
    )


# --- implicit Hub use: the download functions libraries bound at import ----------------------

FILE_DOWNLOAD_MODULE = "huggingface_hub.file_download"
DOWNLOAD_TO_CACHE = "_hf_hub_download_to_cache_dir"
CACHE_LOOKUP = "try_to_load_from_cache"
#: The global the trampoline of ``try_to_load_from_cache`` calls (set in huggingface_hub's module).
_LOOKUP_HOOK = "__hfsnapshot_cache_lookup__"


def _file_download() -> ModuleType:
    return importlib.import_module(FILE_DOWNLOAD_MODULE)


def when_downloads_load(then: Callable[[], None]) -> Callable[[], None]:
    """``then()`` once the module ``hf_hub_download`` lives in is imported: now if it is, else right
    after code first imports it (a run that never does pays nothing). Returns the cancel."""
    return after_import(FILE_DOWNLOAD_MODULE, lambda _module: then())


def wrap_download_to_cache(wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Callable[[], None]:
    """Put ``wrap(original)`` in place of the function ``hf_hub_download`` downloads into the cache with.

    Returns the function that puts the original back. :class:`HubCompatibilityError` when the
    installed release has no such module global.
    """
    module = _file_download()
    original = getattr(module, DOWNLOAD_TO_CACHE, None)
    if not callable(original):
        raise HubCompatibilityError(
            missing_message(
                f"{FILE_DOWNLOAD_MODULE}.{DOWNLOAD_TO_CACHE}", "to see and manage the files hf_hub_download fetches"
            )
            + f". Run with {say('implicit', value='off')}, or install a huggingface_hub release "
            "pytest-hfsnapshot supports."
        )
    return _swap(module, DOWNLOAD_TO_CACHE, original, wrap(original))


HTTP_GET = "http_get"


def wrap_http_get(wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Callable[[], None] | None:
    """Put ``wrap(original)`` in place of the function the client streams a plain-HTTP download with
    (``http_get(url, temp_file, *, resume_size, headers, expected_size, ...)``).

    Returns the function that puts the original back; None (said once) when the release has no such
    function, or one that takes other arguments.
    """
    module = _file_download()
    original: Callable[..., Any] | None = getattr(module, HTTP_GET, None)
    if original is None or not {"url", "temp_file", "resume_size", "headers", "expected_size"} <= _parameters(original):
        _fall_back(
            f"{FILE_DOWNLOAD_MODULE}.{HTTP_GET}(url, temp_file, resume_size=, headers=, expected_size=)",
            "to go on with a cut plain-HTTP download from the byte where it stopped",
            "a cut download starts again from byte 0",
        )
        return None
    return _swap(module, HTTP_GET, original, wrap(original))


def _swap(module: Any, name: str, original: Callable[..., Any], wrapped: Callable[..., Any]) -> Callable[[], None]:
    """Put ``wrapped`` in ``module.name``; the function returned puts ``original`` back while it is still ours."""
    setattr(module, name, wrapped)

    def undo() -> None:
        if getattr(module, name, None) is wrapped:
            setattr(module, name, original)

    return undo


def _parameters(function: Callable[..., Any]) -> set[str]:
    """The parameter names of ``function`` (none when it has no signature to read)."""
    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return set()


def _lookup_trampoline(*args: Any, **kwargs: Any) -> Any:  # pragma: no cover - its code runs as huggingface_hub's
    return __hfsnapshot_cache_lookup__(*args, **kwargs)  # type: ignore[name-defined]  # noqa: F821


def hook_cache_lookup(hook: Callable[..., Any]) -> Callable[[], None]:
    """Make every call of ``try_to_load_from_cache`` (by any reference) call ``hook(original, *args, **kwargs)``.

    transformers binds the function at import and reads cached files through it with no request,
    so the function object itself is changed: its code becomes a trampoline to ``hook``. Returns
    the function that restores it.
    """
    import types

    module = _file_download()
    # The validating decorator's wrapper calls the function it wraps: that one's code is swapped.
    function = inspect.unwrap(getattr(module, CACHE_LOOKUP))
    code = getattr(function, "__code__", None)
    if not isinstance(function, types.FunctionType) or code is None or function.__closure__:
        raise HubCompatibilityError(
            missing_message(
                f"{FILE_DOWNLOAD_MODULE}.{CACHE_LOOKUP} as a plain function", "to see the files read from the cache"
            )
            + f". Run with {say('implicit', value='off')}, or install a huggingface_hub release "
            "pytest-hfsnapshot supports."
        )
    previous = function.__globals__.get(_LOOKUP_HOOK)
    hooked_before = code is _lookup_trampoline.__code__ and callable(previous)
    if hooked_before:
        original: Callable[..., Any] = previous  # type: ignore[assignment]
    else:
        plain = types.FunctionType(code, function.__globals__, function.__name__, function.__defaults__)
        plain.__kwdefaults__ = function.__kwdefaults__
        original = plain

    def call(*args: Any, **kwargs: Any) -> Any:
        return hook(original, *args, **kwargs)

    call.__signature__ = inspect.signature(original)  # type: ignore[attr-defined]
    function.__globals__[_LOOKUP_HOOK] = call
    function.__code__ = _lookup_trampoline.__code__

    def undo() -> None:
        if function.__globals__.get(_LOOKUP_HOOK) is not call:
            return
        if hooked_before:
            function.__globals__[_LOOKUP_HOOK] = previous
        else:
            function.__code__ = code
            del function.__globals__[_LOOKUP_HOOK]

    return undo


def wrap_client_transports(client: Any, wrap: Callable[[Any], Any]) -> None:
    """Replace each transport of an httpx (or httpx2) client by ``wrap(transport)``."""
    transport = getattr(client, "_transport", None)
    mounts = getattr(client, "_mounts", None)
    if transport is None or not isinstance(mounts, dict):
        raise HubCompatibilityError(
            f"the HTTP client of huggingface_hub {hub_version()} ({type(client).__module__}.{type(client).__name__}) "
            "has no _transport and _mounts, which pytest-hfsnapshot wraps to keep offline runs offline. "
            "Install a huggingface_hub release pytest-hfsnapshot supports."
        )
    client._transport = wrap(transport)
    for pattern, mounted in list(mounts.items()):
        if mounted is not None:
            mounts[pattern] = wrap(mounted)


def raise_for_answer(response: Any) -> None:
    """Raise the error huggingface_hub raises for ``response`` (a Hub answer, or one the plugin made), if any."""
    from huggingface_hub import utils

    utils.hf_raise_for_status(response)  # type: ignore[attr-defined]


__all__ = [
    "CACHE_LOOKUP",
    "DOWNLOAD_TO_CACHE",
    "HTTP_GET",
    "ClientListingCache",
    "HubCompatibilityError",
    "client_factory_in_place",
    "client_factory_is",
    "client_listing_cache",
    "close_client_session",
    "endpoint_patches",
    "forget_xet_tokens",
    "has_shared_blob",
    "hook_cache_lookup",
    "http_client_loaded",
    "hub_major",
    "hub_version",
    "missing_message",
    "raise_for_answer",
    "shared_store_enabled",
    "wrap_client_transports",
    "wrap_download_to_cache",
    "wrap_http_get",
    "xet_in_use",
]
