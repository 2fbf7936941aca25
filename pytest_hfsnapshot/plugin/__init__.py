"""The pytest layer: options, markers, fixtures, verdicts and the terminal summary over the core.

Its hooks live in :mod:`pytest_hfsnapshot.plugin.hooks`, the module the ``hfsnapshot`` pytest11
entry point names (``-p no:hfsnapshot`` turns it off).
"""
