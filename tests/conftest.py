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

import pytest

from pytest_hfsnapshot.testing.hub import LocalHub

TRANSPORTS = ("xet", "xet-noshare", "http")
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
