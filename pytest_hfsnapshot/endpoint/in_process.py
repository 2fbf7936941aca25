"""What the pytest process keeps seeing while its children get the endpoint in ``HF_ENDPOINT``.

huggingface_hub read ``HF_ENDPOINT`` before the plugin changed it; datasets reads it again when a test
first imports it (``datasets.config``), and then must see the Hub this process's huggingface_hub sees,
or it takes the Hub's URLs for another server's.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

#: The modules that copy ``HF_ENDPOINT`` at their import, and how to point one at the upstream.
_COPIES = {"datasets.config": ("HF_ENDPOINT", "HUB_DATASETS_URL")}


def point(module: ModuleType, upstream: str) -> None:
    """``datasets.config`` as it reads when ``HF_ENDPOINT`` is the upstream."""
    old = str(getattr(module, "HF_ENDPOINT", upstream))
    module.HF_ENDPOINT = upstream  # type: ignore[attr-defined]
    template = getattr(module, "HUB_DATASETS_URL", None)
    if isinstance(template, str) and template.startswith(old):
        module.HUB_DATASETS_URL = upstream + template[len(old) :]  # type: ignore[attr-defined]


class KeepUpstream(importlib.abc.MetaPathFinder):
    """Installed while the children's environment is: a copying module imported meanwhile gets ``upstream``."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream

    def install(self) -> None:
        for name in _COPIES:
            module = sys.modules.get(name)
            if module is not None and getattr(module, "HF_ENDPOINT", None) != self.upstream:
                point(module, self.upstream)
        sys.meta_path.insert(0, self)

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _COPIES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Pointing(spec.loader, self.upstream)
        return spec


class _Pointing(importlib.abc.Loader):
    def __init__(self, loader: Any, upstream: str) -> None:
        self._loader = loader
        self._upstream = upstream

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        point(module, self._upstream)


__all__ = ["KeepUpstream", "point"]
