"""``python -m pytest_hfsnapshot COMMAND ...``: the command line of :mod:`pytest_hfsnapshot.cli`."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
