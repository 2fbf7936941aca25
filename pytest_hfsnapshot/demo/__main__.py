"""``python -m pytest_hfsnapshot.demo``: see :mod:`pytest_hfsnapshot.demo`."""

from __future__ import annotations

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
