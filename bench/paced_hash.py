"""A bare ``hashlib.sha256`` pass over one file, optionally paced: the reference hashing of workload 17.

:func:`paced_sha256` reads in 1 MiB ``readinto`` calls and, paced, reads 4 MiB and sleeps until
the next 4 MiB are due (as the plugin's hashing thread reads a download behind its writer).
``python -m bench.paced_hash FILE BYTES_PER_SECOND`` runs it in a process of its own once a line
arrives on stdin (a rate of 0: unpaced), and prints its CPU seconds.
"""

from __future__ import annotations

import hashlib
import mmap
import sys
import time

CHUNK = 1 << 20
#: Bytes read between two looks at the pace.
BATCH = 4 * CHUNK


def pace(began: float, done: int, bytes_per_second: float | None) -> None:
    """Sleep until ``done`` bytes are due at ``bytes_per_second`` since ``began`` (monotonic; None: never)."""
    if bytes_per_second:
        wait = began + done / bytes_per_second - time.monotonic()
        if wait > 0:
            time.sleep(wait)


def paced_sha256(path: str, bytes_per_second: float | None = None) -> float:
    """Hash ``path`` (at most ``bytes_per_second``); returns the calling thread's CPU seconds."""
    began_cpu = time.thread_time()
    began = time.monotonic()
    digest = hashlib.sha256()
    # Page-aligned, as pytest_hfsnapshot.core.verify.read_buffer (why: there). Not imported from it:
    # bench.compare's workers import another revision's plugin, which may have none.
    view = memoryview(mmap.mmap(-1, CHUNK))
    done = 0
    with open(path, "rb", buffering=0) as handle:
        while True:
            if done % BATCH == 0:
                pace(began, done, bytes_per_second)
            n = handle.readinto(view)
            if not n:
                break
            digest.update(view[:n])
            done += n
    return time.thread_time() - began_cpu


def main() -> int:
    path, rate = sys.argv[1], float(sys.argv[2])
    sys.stdin.readline()
    began = time.process_time()
    paced_sha256(path, rate or None)
    print(f"{time.process_time() - began:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
