"""A local writer standing in for a download: ``python -m bench.writer PATH BYTES BYTES_PER_SECOND``.

Writes ``BYTES`` (one random MiB over and over) to ``PATH.incomplete`` in 1 MiB writes, at most
``BYTES_PER_SECOND`` (0: unpaced), then renames it to ``PATH``, as huggingface_hub's HTTP download
does. Workload 18 follows it with the plugin's hashing thread: no client and no Hub beside it.
"""

from __future__ import annotations

import os
import sys
import time

from .paced_hash import CHUNK, pace


def write(path: str, nbytes: int, bytes_per_second: float | None = None) -> None:
    """Write ``nbytes`` to ``path + ".incomplete"`` (at most ``bytes_per_second``), then rename it to ``path``."""
    data = os.urandom(CHUNK)
    began = time.monotonic()
    done = 0
    with open(path + ".incomplete", "wb", buffering=0) as handle:
        while done < nbytes:
            pace(began, done, bytes_per_second)
            done += handle.write(data[: min(CHUNK, nbytes - done)])
    os.rename(path + ".incomplete", path)


def main() -> int:
    path, nbytes, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    write(path, nbytes, rate or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
