"""The pytest layer: options, markers, fixtures, outcomes and reporting over the core engine."""

from __future__ import annotations

import pytest

from .testing import fixtures as testing_fixtures


def pytest_configure(config: pytest.Config) -> None:
    # The testing kit's fixtures (local_hub, ...) come with the plugin, like pytest-httpserver's.
    if not config.pluginmanager.is_registered(testing_fixtures):
        config.pluginmanager.register(testing_fixtures, "hfsnapshot-testing")
