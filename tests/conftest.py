"""Every test that talks to the local Hub runs on each transfer path real users have.

- ``xet``: hf_xet downloads into huggingface_hub's shared blob store (the default on the Hub);
- ``xet-noshare``: hf_xet with ``HF_HUB_DISABLE_SHARED_BLOBS=1`` (repo-local blobs);
- ``http``: plain HTTP via the CDN origin (``HF_HUB_DISABLE_XET=1``).

A test that uses ``local_hub`` is parametrized over all three; ``@pytest.mark.transports(...)``
on a test or module narrows the list (for tests of the server itself, or of input that is
rejected before any transfer). The switch is made the way a user makes it: through
huggingface_hub's ``constants`` (read at call time) for this process and the environment for
children (xdist workers, subprocesses).
"""

from __future__ import annotations

import os

import pytest

# The whole core, imported by the outer session before any pytester run: an inline run drops the
# modules it imported from sys.modules, but a submodule stays reachable as an attribute of its
# package (`from pytest_hfsnapshot import retry`), so a later run would mix that old module, and
# the huggingface_hub error classes it holds, with freshly imported ones.
import pytest_hfsnapshot.core.engine
import pytest_hfsnapshot.core.prefetch
import pytest_hfsnapshot.core.refusals  # noqa: F401
from pytest_hfsnapshot.testing.hub import LocalHub

TRANSPORTS = ("xet", "xet-noshare", "http")
# hf_xet retries a failed CAS request itself, 5 times with a backoff that starts at seconds (a
# 5xx storm costs it minutes). Fault tests keep every request and shrink only the waits, as the
# ``client_clock`` fixture does for huggingface_hub's own backoff. Read when hf_xet starts.
XET_FAST_RETRIES = {"HF_XET_CLIENT_RETRY_BASE_DELAY": "10ms"}
os.environ.update(XET_FAST_RETRIES)
_SWITCHES = {
    "xet": {"HF_HUB_DISABLE_XET": False, "HF_HUB_DISABLE_SHARED_BLOBS": False},
    "xet-noshare": {"HF_HUB_DISABLE_XET": False, "HF_HUB_DISABLE_SHARED_BLOBS": True},
    "http": {"HF_HUB_DISABLE_XET": True, "HF_HUB_DISABLE_SHARED_BLOBS": False},
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "transports(*names): the transfer paths a local_hub test runs on")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "transport" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("transports")
    names = marker.args if marker is not None else TRANSPORTS
    unknown = set(names) - set(TRANSPORTS)
    if unknown:
        raise ValueError(f"unknown transports {sorted(unknown)}: use {TRANSPORTS}")
    metafunc.parametrize("transport", names, indirect=True)


def raised_from(outer: BaseException, inner: BaseException) -> BaseException:
    """``outer`` as raised ``from inner`` (how libraries such as transformers wrap the Hub's errors)."""
    try:
        try:
            raise inner
        except BaseException as error:
            raise outer from error
    except BaseException as caught:
        return caught


def xet_in_use(hub: LocalHub) -> bool:
    """Whether the client downloads the hub's LFS files through hf_xet in this test."""
    import huggingface_hub.constants as constants

    return hub.xet and not constants.HF_HUB_DISABLE_XET


def file_fetches(hub: LocalHub, resolve_path: str) -> int:
    """How many times one repo file's bytes were fetched, whichever way the client took.

    A file body is a 200 answer to a GET: on ``resolve`` itself (small files), on the CDN
    (plain HTTP), or a Xet reconstruction; the local Hub matches the last two as that file's
    ``resolve`` path. Redirects (302) and xorb ranges (206) are parts of one fetch.
    """
    return hub.request_count(resolve_path, method="GET", status=200)


def file_byte_bodies(hub: LocalHub, resolve_path: str) -> int:
    """How many answers carried some of one repo file's bytes (GET, 200 or 206), cut ones included.

    A small file's bytes come from ``resolve`` itself, an LFS file's from the CDN (plain HTTP) or
    from xorb ranges (Xet, matched as the file's ``resolve`` path); a Xet reconstruction says
    where they are and carries none of them.
    """
    return sum(
        1
        for r in hub.counters().records
        if r.matches(resolve_path)
        and r.method == "GET"
        and r.status in (200, 206)
        and "/reconstructions/" not in r.path
    )


@pytest.fixture
def transport(request: pytest.FixtureRequest) -> str:
    """The transfer path of this test run (see the module docstring)."""
    return str(getattr(request, "param", "xet"))


@pytest.fixture
def local_hub(local_hub: LocalHub, transport: str, monkeypatch: pytest.MonkeyPatch) -> LocalHub:
    import huggingface_hub.constants as constants

    for name, value in _SWITCHES[transport].items():
        if hasattr(constants, name):
            monkeypatch.setattr(constants, name, value)
        monkeypatch.setenv(name, "1" if value else "0")
    return local_hub
