"""What points huggingface_hub at a local Hub, and the one way to apply and undo it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..core import _hf_compat
from ._server import LOOPBACK_HOSTS

__all__ = ["ClientPatches", "client_patches", "close_client_session"]


@dataclass
class ClientPatches:
    """What points ``huggingface_hub`` at a local Hub: module attributes for this process,
    environment variables for child processes (``None`` means: unset it)."""

    attributes: list[tuple[ModuleType, str, Any]]
    environ: dict[str, str | None]

    def apply(self, patcher: _Patcher) -> None:
        """Apply every patch through ``patcher`` (a ``pytest.MonkeyPatch``), which undoes them later."""
        for module, name, value in self.attributes:
            patcher.setattr(module, name, value)
        for env_name, env_value in self.environ.items():
            if env_value is None:
                patcher.delenv(env_name, raising=False)
            else:
                patcher.setenv(env_name, env_value)

    @contextlib.contextmanager
    def applied(self, patcher: _Patcher | None = None) -> Iterator[None]:
        """Apply every patch for the block, with fresh client sessions (:func:`close_client_session`) at both ends.

        With ``patcher`` (a ``pytest.MonkeyPatch``) the patches are undone when it undoes them
        (a fixture's teardown); without one, when the block ends (no pytest needed).
        """
        restorer = _Restorer()  # left empty when ``patcher`` does the undoing
        try:
            self.apply(restorer if patcher is None else patcher)
            close_client_session()
            yield
        finally:
            restorer.undo()
            close_client_session()

    def child_environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` (e.g. ``os.environ``) with the environment patches applied: for a child process."""
        env = dict(base)
        for name, value in self.environ.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env


class _Patcher(Protocol):
    """The part of ``pytest.MonkeyPatch`` that ClientPatches.apply uses (no pytest import here)."""

    def setattr(self, target: object, name: str, value: object) -> None: ...

    def setenv(self, name: str, value: str) -> None: ...

    def delenv(self, name: str, raising: bool = ...) -> None: ...


class _Restorer:
    """A patcher without pytest: remembers what each change replaced and puts it back, last first."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def setattr(self, target: object, name: str, value: object) -> None:
        old = getattr(target, name)
        self._undo.append(lambda: setattr(target, name, old))
        setattr(target, name, value)

    def setenv(self, name: str, value: str) -> None:
        self._remember_env(name)
        os.environ[name] = value

    def delenv(self, name: str, raising: bool = True) -> None:
        if raising and name not in os.environ:
            raise KeyError(name)
        self._remember_env(name)
        os.environ.pop(name, None)

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _remember_env(self, name: str) -> None:
        old = os.environ.get(name)
        self._undo.append(lambda: _set_env(name, old))


def client_patches(url: str, cache_dir: Path, home_dir: Path) -> ClientPatches:
    """The patches that send ``huggingface_hub`` (this process and children) to ``url`` and ``cache_dir``.

    ``home_dir`` stands in for ``HF_HOME``: an empty token file location (so no stored token is
    found), the assets, Xet (``HF_XET_CACHE``: hf_xet's logs and staging) and bookkeeping files.
    ``huggingface_hub`` reads its environment once, at import, into ``constants`` and a few
    module-level copies: all of them are listed here (only those that exist in the installed
    version). Xet stays as the environment has it (``HF_HUB_DISABLE_XET`` is not touched); the
    loopback hosts are added to ``NO_PROXY``.
    """
    import huggingface_hub.constants as constants

    host = urlsplit(url).hostname or "127.0.0.1"
    token_path = str(home_dir / "token")
    cache = str(cache_dir)
    values: dict[str, Any] = {
        "ENDPOINT": url,
        "HUGGINGFACE_CO_URL_TEMPLATE": url + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_URL_HOSTS": frozenset(getattr(constants, "HF_URL_HOSTS", frozenset())) | {host},
        "HF_HOME": str(home_dir),
        "HF_HUB_CACHE": cache,
        "HUGGINGFACE_HUB_CACHE": cache,
        "HF_ASSETS_CACHE": str(home_dir / "assets"),
        "HUGGINGFACE_ASSETS_CACHE": str(home_dir / "assets"),
        "HF_XET_CACHE": str(home_dir / "xet"),
        "HF_TOKEN_PATH": token_path,
        "HF_STORED_TOKENS_PATH": str(home_dir / "stored_tokens"),
        "CHECK_FOR_UPDATE_DONE_PATH": str(home_dir / ".check_for_update_done"),
        "CHECK_FOR_SKILL_UPDATE_DONE_PATH": str(home_dir / ".check_for_skill_update_done"),
        "AGENT_HARNESSES_PATH": str(home_dir / ".agent_harnesses.json"),
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_HUB_DISABLE_UPDATE_CHECK": True,
    }
    attributes: list[tuple[ModuleType, str, Any]] = [
        (constants, name, value) for name, value in values.items() if hasattr(constants, name)
    ]
    # The private copies: the staging switch, copies taken at import, the Hub origins.
    attributes += _hf_compat.endpoint_patches(url, hub_cache=cache, assets_cache=str(home_dir / "assets"))

    environ: dict[str, str | None] = {
        "HF_ENDPOINT": url,
        "HF_HUB_CACHE": cache,
        "HF_HOME": str(home_dir),
        "HF_XET_CACHE": str(home_dir / "xet"),
        "HF_TOKEN_PATH": token_path,
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
    }
    # The local origins (Hub, CAS, and the CDN on another loopback host) are reached directly,
    # never through an ambient HTTP(S)_PROXY: httpx and hf_xet both read NO_PROXY.
    for no_proxy in ("NO_PROXY", "no_proxy"):
        ambient = [h.strip() for h in os.environ.get(no_proxy, "").split(",") if h.strip()]
        environ[no_proxy] = ",".join(dict.fromkeys([*ambient, host, *LOOPBACK_HOSTS]))
    for hidden in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_OIDC_RESOURCE",
        "HF_OIDC_ID_TOKEN",
        "HUGGINGFACE_HUB_CACHE",
        "HUGGINGFACE_CO_STAGING",
        "TRANSFORMERS_OFFLINE",
        "HF_ASSETS_CACHE",
    ):
        environ[hidden] = None
    return ClientPatches(attributes, environ)


def close_client_session() -> None:
    """Drop huggingface_hub's per-process HTTP client and cached Xet tokens; the next call makes fresh ones.

    Keeps pooled keep-alive connections to a previous server from outliving it, and a Xet token of
    a previous server from being reused: the client caches tokens by refresh URL, and a new server
    on a recycled port serves the same URL (commit ids are deterministic) with another CAS.
    """
    _hf_compat.close_client_session()
    _hf_compat.forget_xet_tokens()


def _set_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
