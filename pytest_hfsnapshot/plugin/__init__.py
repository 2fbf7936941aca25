"""The pytest layer over the core; its entry point is :mod:`pytest_hfsnapshot.plugin.hooks`."""

import sys

# pytest marks every package of a plugin's distribution for assertion rewriting, and its rewriting
# loader reads each module's source and unmarshals the cached code from an open file, several times
# slower than Python's own loader: a third of what this plugin added to a pytest run's start-up. The package
# asserts nothing a user reads, so the modules imported from here on load as Python loads them.
# Where pytest's hook has no such set (another version), they are rewritten as before.
for _finder in sys.meta_path:
    _marked = getattr(_finder, "_must_rewrite", None)
    if isinstance(_marked, set):
        _marked.discard(__name__.partition(".")[0])
