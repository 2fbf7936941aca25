"""Griffe extension: Sphinx roles in the package's docstrings read as code in the manual.

The docstrings are written for ``help()`` and editors, with roles such as
``:class:`~pytest_hfsnapshot.Snapshot``` and ``:func:`materialize```; Markdown has no roles,
so each becomes the code span of its target (its last name, with its class, for ``~`` targets).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    target = match.group(2)
    if match.group(1):
        # ``~a.b.Class.method`` reads ``Class.method``, as ``~a.b.Class`` reads ``Class``.
        parts = target.split(".")
        keep = 2 if len(parts) > 1 and parts[-2][:1].isupper() else 1
        target = ".".join(parts[-keep:])
    return f"`{target}`"


class SphinxRolesAsCode(griffe.Extension):
    """Rewrite ``:role:`target``` to ```target``` in every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_code, obj.docstring.value)
