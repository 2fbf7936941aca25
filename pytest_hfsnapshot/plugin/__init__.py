"""The pytest layer over the core; its entry point is :mod:`pytest_hfsnapshot.plugin.hooks`."""

import sys


def _load_without_rewriting(package: str) -> None:
    # pytest marks every package of a plugin's distribution for assertion rewriting, and its
    # rewriting loader reads each module's source and unmarshals the cached code from an open file,
    # several times slower than Python's own loader (docs/benchmarks.md, run 15). The package asserts
    # nothing a user reads, so the modules imported from here on load as Python loads them. Where
    # pytest's hook has no such set (another version), they are rewritten as before.
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set):
            marked.discard(package)


_load_without_rewriting(__name__.partition(".")[0])
