"""The pytest layer over the core; its entry point is :mod:`pytest_hfsnapshot.plugin.hooks`."""
