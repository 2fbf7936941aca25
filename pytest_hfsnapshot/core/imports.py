"""Work run right after a module's own code: hooks go on a library when code first imports it."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Collection, Sequence
from types import ModuleType
from typing import Any


class AfterImport(importlib.abc.MetaPathFinder):
    """While installed, each module named in ``names`` runs ``then(module)`` as soon as it is imported.

    It finds nothing itself: it asks the finders after it and hands the loader they give a wrap, so
    editable installs and pytest's own finders keep working. ``once``: removed after the first.
    """

    def __init__(self, names: Collection[str], then: Callable[[ModuleType], None], *, once: bool = False) -> None:
        self._names = frozenset(names)
        self._then = then
        self._once = once
        #: Set while this thread asks the other finders (one of them may be another AfterImport).
        self._asking = threading.local()

    def install(self) -> None:
        sys.meta_path.insert(0, self)

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._names or getattr(self._asking, "now", False):
            return None
        self._asking.now = True
        try:
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None) if finder is not self else None
                spec = find(fullname, path, target) if find is not None else None
                if spec is not None:
                    if spec.loader is not None:
                        spec.loader = _Then(spec.loader, self._ran)
                    return spec  # type: ignore[no-any-return]
            return None
        finally:
            self._asking.now = False

    def _ran(self, module: ModuleType) -> None:
        if self._once:
            self.remove()
        self._then(module)


def after_import(name: str, then: Callable[[ModuleType], None]) -> Callable[[], None]:
    """``then(module)`` now if ``name`` is imported, else once, right after its import; returns the
    function that cancels a call still to come."""
    module = sys.modules.get(name)
    if module is not None:
        then(module)
        return lambda: None
    waiting = AfterImport((name,), then, once=True)
    waiting.install()
    return waiting.remove


class _Then(importlib.abc.Loader):
    """A module's own loader, then ``then(module)``."""

    def __init__(self, loader: Any, then: Callable[[ModuleType], None]) -> None:
        self._loader = loader
        self._then = then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._then(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


__all__ = ["AfterImport", "after_import"]
