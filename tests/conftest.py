"""The transfer paths real users have, and the one switch between them.

- ``xet``: hf_xet downloads into huggingface_hub's shared blob store (the default on the Hub);
- ``xet-noshare``: hf_xet with ``HF_HUB_DISABLE_SHARED_BLOBS=1`` (repo-local blobs);
- ``http``: plain HTTP via the CDN origin (``HF_HUB_DISABLE_XET=1``).

A test that uses ``local_hub`` runs once, on ``xet`` (what real users get), unless it names its
transports with the ``transports`` marker, on the test or for a whole module::

    @pytest.mark.transports("xet", "xet-noshare", "http")   # one run per transport
    def test_a_truncated_blob_is_repaired(local_hub): ...

    pytestmark = pytest.mark.transports("xet", "xet-noshare", "http")   # every test of the module

A test opts in when its behaviour depends on the path the bytes take: it downloads and checks
files, blobs, links or the shared store, hashes or repairs them, puts faults on file bodies, or
kills or races processes mid-transfer. A test of what happens before any byte moves (a 403, a 401,
bad input, options, messages, summaries) runs once. A narrower list (``transports("http")``) pins
a test to the paths it is about; inside an opted-in module, ``transports("xet")`` on a test runs
it once. ``pytest --one-transport`` runs every test once, on the first transport it names (the
suite on another interpreter: the transfer code is huggingface_hub's and hf_xet's).

The switch is made the way a user makes it: through huggingface_hub's ``constants`` (read at
call time) for this process and the environment for children (xdist workers, subprocesses).
"""

from __future__ import annotations

import inspect
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
DEFAULT_TRANSPORT = "xet"
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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--one-transport",
        action="store_true",
        help="run each local_hub test once, on the first transport its transports marker names "
        "(tox's py310 and py313: the transfer code is huggingface_hub's and hf_xet's, not the interpreter's)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "transports(*names): run this local_hub test on each of these transfer paths (default: xet once)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "transport" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("transports")
    if marker is None:
        if "transport" in inspect.signature(metafunc.function).parameters:
            # A test that branches on the transport and runs on one of them tests less than it says.
            raise ValueError(
                f"{metafunc.definition.nodeid} asks for `transport` but names none: mark it "
                '@pytest.mark.transports("xet", "xet-noshare", "http") (or the ones it is about)'
            )
        return  # one run, on the ``transport`` fixture's default
    names = marker.args
    if not names:
        raise ValueError(f"transports() needs at least one of {TRANSPORTS}")
    unknown = set(names) - set(TRANSPORTS)
    if unknown:
        raise ValueError(f"unknown transports {sorted(unknown)}: use {TRANSPORTS}")
    if metafunc.config.getoption("one_transport"):
        names = names[:1]
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
    """The transfer path of this test run: ``xet`` unless the ``transports`` marker says otherwise."""
    return str(getattr(request, "param", DEFAULT_TRANSPORT))


@pytest.fixture
def local_hub(local_hub: LocalHub, transport: str, monkeypatch: pytest.MonkeyPatch) -> LocalHub:
    import huggingface_hub.constants as constants

    for name, value in _SWITCHES[transport].items():
        if hasattr(constants, name):
            monkeypatch.setattr(constants, name, value)
        monkeypatch.setenv(name, "1" if value else "0")
    return local_hub
