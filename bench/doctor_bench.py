"""What ``pytest-hfsnapshot doctor`` costs against the plain tools (issue 41):
``python -m bench.doctor_bench [--quick] [--pairs N]``.

1. ``doctor --sha256`` on a cache of at least 2 GiB in several repos (``--quick``: 64 MiB) against
   ``sha256sum`` over the same files with the same parallelism (``xargs -P <cores>``), and against
   ``openssl dgst -sha256`` the same way (the hash code Python's hashlib uses);
2. ``doctor`` without ``--sha256`` on 10,000 files (``--quick``: 1,000) against a stat walk, each a
   process started from nothing (the interpreter's start counted on both sides): a Python walk that
   stats every entry of the cache folder (what the doctor reads: snapshots, blobs, locks, records,
   listings), the target's comparison; a Python walk of the snapshots alone; ``find -L`` of the
   snapshots; and in one process, ``doctor.scan`` against ``os.stat`` of every snapshot entry;
3. ``hf cache verify`` of every repo (online, against the local Hub), for the record.

The caches are made by huggingface_hub through ``materialize`` from a local Hub (plain HTTP), in a
temporary folder. Each comparison runs ABBA pairs (A, B, B, A: drift on a shared machine cancels):
the ratio of a pair is B's two walls over A's two; the median ratio is printed with the lowest and
highest, beside an A-against-A null (the same pairs with A in both places: the noise floor). Every
command reads a warm page cache (one run of each is made first and not counted).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pytest_hfsnapshot import materialize
from pytest_hfsnapshot.core.doctor import scan as doctor
from pytest_hfsnapshot.testing.hub import LocalHub

GIB = 1 << 30
MIB = 1 << 20
#: A stat walk as a process: ``os.stat`` (links followed) of every entry below each folder given.
WALK = """
import os, sys
for top in sys.argv[1:]:
    for dirpath, _, names in os.walk(top):
        for name in names:
            os.stat(os.path.join(dirpath, name))
"""


def cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def wall(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def command(args: list[str] | str) -> Callable[[], None]:
    """A command run to its end (its output discarded); a failure stops the bench."""

    def run() -> None:
        done = subprocess.run(args, shell=isinstance(args, str), capture_output=True, text=True)
        if done.returncode not in (0, 1):  # the doctor exits 1 on a problem: still a full scan
            raise SystemExit(f"{args!r} exited {done.returncode}:\n{done.stdout}{done.stderr}")

    return run


def abba(a: Callable[[], object], b: Callable[[], object], pairs: int) -> list[float]:
    """B's wall over A's, for each of ``pairs`` A-B-B-A rounds (after one unmeasured run of each)."""
    a()
    b()
    ratios = []
    for _ in range(pairs):
        a1, b1, b2, a2 = wall(a), wall(b), wall(b), wall(a)
        ratios.append((b1 + b2) / (a1 + a2))
    return ratios


def walls(run: Callable[[], object], rounds: int) -> list[float]:
    run()
    return [wall(run) for _ in range(rounds)]


def show(name: str, ratios: list[float], null: list[float]) -> str:
    median = statistics.median(ratios)
    return (
        f"{name}: {median:.3f}x (range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} ABBA pairs); "
        f"A-vs-A null {statistics.median(null):.3f}x (range {min(null):.3f}-{max(null):.3f})"
    )


def build(hub: LocalHub, cache: Path, *, weights: int, repos: int, small: int) -> list[str]:
    """Repos of one weight file each (``weights`` bytes in all) plus ``small`` small files spread over
    them, materialized into ``cache``; the repo ids."""
    ids = []
    per_repo = weights // repos
    for n in range(repos):
        repo = f"bench/doctor-{n}"
        files: dict[str, bytes | str] = {"config.json": f'{{"model_type": "bert", "n": {n}}}'}
        files["model.safetensors"] = os.urandom(per_repo)
        for i in range(small // repos):
            files[f"data/{i:05d}.json"] = f'{{"repo": {n}, "row": {i}}}'
        hub.add_repo(repo, files)
        materialize(repo, cache_dir=cache)
        ids.append(repo)
    return ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.doctor_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (64 MiB, 1,000 files): a check that it runs")
    parser.add_argument("--pairs", type=int, default=5, help="ABBA pairs per comparison (default 5)")
    parser.add_argument("--weights-mib", type=int, help="the size of the hashed cache in MiB (default 2048; 64 quick)")
    parser.add_argument(
        "--files", type=int, help="the small files of the stat comparison (default 10,000; 1,000 quick)"
    )
    options = parser.parse_args(argv)
    weights = (options.weights_mib or (64 if options.quick else 2048)) * MIB
    small = options.files or (1_000 if options.quick else 10_000)
    workers = cores()
    python = [sys.executable, "-m", "pytest_hfsnapshot", "doctor"]
    with tempfile.TemporaryDirectory(prefix="doctor-bench-") as tmp, LocalHub(xet=False) as hub:
        big, many = Path(tmp) / "big", Path(tmp) / "many"
        with hub.configure_client(big):
            started = time.perf_counter()
            big_ids = build(hub, big, weights=weights, repos=8, small=0)
            many_ids = build(hub, many, weights=8 * 1024 * 10, repos=10, small=small)
            built = time.perf_counter() - started
            print(
                f"caches built in {built:.0f}s: {weights / MIB:.0f} MiB in {len(big_ids)} repos; "
                f"{small + 2 * len(many_ids)} files in {len(many_ids)} repos; {workers} cores"
            )

            doctor_sha = command([*python, "--cache-dir", str(big), "--sha256"])
            blobs = shlex.quote(str(big))
            sha256sum = command(
                f"find {blobs} -path '*/blobs/*' -type f ! -name '*.incomplete' -print0 "
                f"| xargs -0 -P {workers} -n 1 sha256sum > /dev/null"
            )
            print(show("doctor --sha256 / sha256sum with xargs -P", abba(sha256sum, doctor_sha, options.pairs),
                       abba(sha256sum, sha256sum, options.pairs)))  # fmt: skip
            if shutil.which("openssl"):
                openssl = command(
                    f"find {blobs} -path '*/blobs/*' -type f ! -name '*.incomplete' -print0 "
                    f"| xargs -0 -P {workers} -n 1 openssl dgst -sha256 > /dev/null"
                )
                print(show("doctor --sha256 / openssl dgst -sha256 with xargs -P",
                           abba(openssl, doctor_sha, options.pairs),
                           abba(openssl, openssl, options.pairs)))  # fmt: skip
            hashed = walls(doctor_sha, 3)
            print(f"  doctor --sha256 alone: median {statistics.median(hashed):.2f}s for {weights / MIB:.0f} MiB")

            doctor_stat = command([*python, "--cache-dir", str(many)])
            walk_cache = command([sys.executable, "-c", WALK, str(many)])
            print(show("doctor (sizes) / Python stat walk of the whole cache, as processes",
                       abba(walk_cache, doctor_stat, options.pairs),
                       abba(walk_cache, walk_cache, options.pairs)))  # fmt: skip
            folders = [str(p) for p in sorted(many.glob("models--*/snapshots"))]
            walk_snapshots = command([sys.executable, "-c", WALK, *folders])
            print(show("doctor (sizes) / Python stat walk of the snapshots, as processes",
                       abba(walk_snapshots, doctor_stat, options.pairs),
                       abba(walk_snapshots, walk_snapshots, options.pairs)))  # fmt: skip
            snapshots = " ".join(shlex.quote(folder) for folder in folders)
            find = command(f"find -L {snapshots} -type f -printf '%s\\n' > /dev/null")
            print(show("doctor (sizes) / find -L, as commands", abba(find, doctor_stat, options.pairs),
                       abba(find, find, options.pairs)))  # fmt: skip
            root = doctor.open_cache(many, layer=False)

            def stat_walk() -> None:
                for folder in sorted(many.glob("models--*/snapshots")):
                    for dirpath, _, names in os.walk(folder):
                        for name in names:
                            os.stat(os.path.join(dirpath, name))

            def scan() -> None:
                doctor.scan(root)

            print(show("doctor.scan / os.walk + os.stat, in one process", abba(stat_walk, scan, options.pairs),
                       abba(stat_walk, stat_walk, options.pairs)))  # fmt: skip
            report = doctor.scan(root)
            print(f"  doctor.scan alone: {wall(scan):.3f}s for {report.files} files of {report.snapshots} snapshots")

            hf = Path(sys.executable).with_name("hf")
            verify = [[str(hf), "cache", "verify", repo, "--cache-dir", str(big)] for repo in big_ids]
            verify_all = command(" && ".join(shlex.join(args) for args in verify))
            print(
                f"hf cache verify, one call per repo ({len(big_ids)} repos, online), for the record: "
                f"median {statistics.median(walls(verify_all, 3)):.2f}s; "
                f"doctor --sha256 (the whole cache, offline): {statistics.median(hashed):.2f}s"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
