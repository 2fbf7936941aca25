"""The testing kit's plugin (entry point ``hfsnapshot-testing``): the ``local_hub`` and ``half_written`` fixtures."""

from __future__ import annotations

import pytest

from . import fixtures


def pytest_configure(config: pytest.Config) -> None:
    manager = config.pluginmanager
    if manager.is_blocked("hfsnapshot"):
        return
    config.addinivalue_line(
        "markers", "local_hub(xet=None, **options): LocalHub options of the local_hub fixture (xet=False: plain HTTP)."
    )
    # Under the module's own name, so a `pytest_plugins = ["pytest_hfsnapshot.testing.fixtures"]`
    # left in a conftest finds it registered instead of registering it twice.
    if not manager.is_registered(fixtures):
        manager.register(fixtures, fixtures.__name__)
    if manager.hasplugin("pytester"):
        _import_hf_xet_once()


def _import_hf_xet_once() -> None:
    """Import hf_xet now, before any ``pytester`` run can.

    ``pytester`` drops the modules an inline run imported; hf_xet's Rust core cannot start twice
    in one process ("a global default trace dispatcher has already been set"), so a second
    import after such a run kills the test process. Imported by the outer session it survives
    every inline run. Only where pytester is in use: other suites do not pay for the import.
    """
    import contextlib
    import importlib

    with contextlib.suppress(ImportError):
        importlib.import_module("hf_xet")
