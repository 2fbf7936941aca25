"""What the pytest process keeps seeing while its children get the endpoint in ``HF_ENDPOINT``.

huggingface_hub read ``HF_ENDPOINT`` before the plugin changed it; datasets reads it again when a test
first imports it (``datasets.config``), and then must see the Hub this process's huggingface_hub sees,
or it takes the Hub's URLs for another server's.
"""

from __future__ import annotations

import sys
from types import ModuleType

from ..core.imports import AfterImport

#: The modules that copy ``HF_ENDPOINT`` at their import, and how to point one at the upstream.
_COPIES = {"datasets.config": ("HF_ENDPOINT", "HUB_DATASETS_URL")}


def point(module: ModuleType, upstream: str) -> None:
    """``datasets.config`` as it reads when ``HF_ENDPOINT`` is the upstream."""
    old = str(getattr(module, "HF_ENDPOINT", upstream))
    module.HF_ENDPOINT = upstream  # type: ignore[attr-defined]
    template = getattr(module, "HUB_DATASETS_URL", None)
    if isinstance(template, str) and template.startswith(old):
        module.HUB_DATASETS_URL = upstream + template[len(old) :]  # type: ignore[attr-defined]


class KeepUpstream:
    """Installed while the children's environment is: a copying module imported meanwhile gets ``upstream``."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self._hook = AfterImport(_COPIES, lambda module: point(module, upstream))

    def install(self) -> None:
        for name in _COPIES:
            module = sys.modules.get(name)
            if module is not None and getattr(module, "HF_ENDPOINT", None) != self.upstream:
                point(module, self.upstream)
        self._hook.install()

    def remove(self) -> None:
        self._hook.remove()


__all__ = ["KeepUpstream", "point"]
