"""Stands in for huggingface_hub's tests/conftest.py, which their sdist leaves out.

It registers the markers the vendored files use and defines ``RepoFactory``, which
test_file_download.py imports. Its fixtures (``api``, ``repo_factory``) create repos on a Hub,
which the local Hub cannot: the tests that use them are deselected (compat/deselected.txt), and
the fixtures fail if one is not.
"""

from __future__ import annotations

import pytest

MARKERS = {
    "production": "reads repos that exist on huggingface.co (here: on the local Hub, under the same ids)",
    "transfer": "upload or download test",
    "xet": "needs hf_xet",
    "api": "does not depend on Xet",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


class RepoFactory:
    """The type test_file_download.py imports; the repos it makes are never made here."""

    def __call__(self, **kwargs: object) -> object:
        raise NotImplementedError("creating a repo needs the Hub's upload API")


@pytest.fixture
def api() -> None:
    pytest.fail("the `api` fixture creates repos on the Hub: deselect this test in compat/deselected.txt")


@pytest.fixture
def repo_factory() -> None:
    pytest.fail("the `repo_factory` fixture creates repos on the Hub: deselect this test in compat/deselected.txt")
