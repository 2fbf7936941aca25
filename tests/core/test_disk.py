"""A full (or read-only) disk, said plainly and caught before the transfer, on a real small filesystem.

Each scenario runs in a child process with its own mount namespace (``unshare --mount``) in which
a tmpfs of a few MiB is mounted as the cache; the local Hub runs here, in the parent, and the
child finds it through the environment the ``local_hub`` fixture sets. The child reports what it
got and what its cache holds as JSON, since the parent cannot see into that mount.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import raised_from

from pytest_hfsnapshot import DiskError, HfSnapshotError
from pytest_hfsnapshot.core.cache.layout import RepoCache
from pytest_hfsnapshot.core.cache.verify import ExpectedFile
from pytest_hfsnapshot.core.engine import space
from pytest_hfsnapshot.core.hub import retry
from pytest_hfsnapshot.testing.hub import LocalHub

MiB = 1024 * 1024
WEIGHTS = "*.safetensors"


def _mount_problem() -> str | None:
    if sys.platform != "linux":
        return "tmpfs in a private mount namespace needs Linux"
    if os.geteuid() != 0:
        return "mounting a tmpfs with `unshare --mount` needs root"
    if shutil.which("unshare") is None:
        return "the unshare command (util-linux) is not installed"
    probe = subprocess.run(
        ["unshare", "--mount", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        return f"cannot mount a tmpfs in a private mount namespace here: {probe.stderr.strip()}"
    return None


_PROBLEM = _mount_problem()
small_fs = pytest.mark.skipif(_PROBLEM is not None, reason=str(_PROBLEM))

# Run in the child after the scenario: what it raised or returned, and every file of the cache.
CHILD = r"""
import json, os, sys, traceback
cache = os.environ["SMALL_CACHE"]
out = {}
try:
    out["result"] = scenario(cache)
except Exception as error:
    out["error"] = {
        "type": type(error).__name__,
        "message": str(error),
        "errno": getattr(error, "errno", None),
        "needed": getattr(error, "needed", None),
        "free": getattr(error, "free", None),
        "filename": getattr(error, "filename", None),
        "folder": getattr(error, "folder", None),
        "cause": getattr(error, "cause", None),
        "traceback": traceback.format_exc(),
    }
files = {}
for root, _, names in os.walk(cache):
    for name in names:
        path = os.path.join(root, name)
        # -1 for a link (a snapshot's, or a repo blob's into the shared store).
        files[os.path.relpath(path, cache)] = -1 if os.path.islink(path) else os.lstat(path).st_size
out["files"] = files
print("RESULT " + json.dumps(out), flush=True)
"""


def in_small_fs(
    mount: Path, scenario: str, *, size: str = "6m", options: str = "", timeout: float = 300
) -> dict[str, Any]:
    """Run ``scenario`` (the body of ``def scenario(cache):``) with a fresh tmpfs of ``size`` as ``cache``."""
    mount.mkdir(exist_ok=True)
    script = "def scenario(cache):\n" + textwrap.indent(textwrap.dedent(scenario), "    ") + "\n" + CHILD
    mount_options = f"size={size}" + (f",{options}" if options else "")
    command = f'mount -t tmpfs -o {mount_options} tmpfs "$SMALL_CACHE" && exec "$0" -c "$1"'
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", command, sys.executable, script],
        env={**os.environ, "SMALL_CACHE": str(mount)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"the child reported nothing (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    data: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    data["stdout"], data["stderr"] = done.stdout, done.stderr
    return data


def weights(size: int, seed: int) -> bytes:
    # Random bytes: Xet would compress a constant fill to nothing on the wire.
    return random.Random(seed).randbytes(size)


def blob_files(files: dict[str, int]) -> list[str]:
    """Cached contents (repo blobs and shared-store files) and downloads in flight, not links or our records."""
    return [
        p
        for p in files
        if (p.startswith("models--") and "/blobs/" in p) or (p.startswith("blobs/") and len(p.split("/")) == 3)
    ]


def assert_nothing_partial(files: dict[str, int], repo_folder: str, sizes: set[int]) -> None:
    assert not [p for p in files if p.endswith(".incomplete")], files
    assert not [p for p in blob_files(files) if files[p] in sizes or files[p] > 1024], files
    assert not [p for p in files if "/records/" in p and repo_folder in p], files


# --- the classification and the words, without a disk ----------------------------------------


@pytest.mark.parametrize(
    "number", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EMFILE, errno.ENAMETOOLONG]
)
def test_filesystem_errors_are_their_own_kind_and_never_transient(number: int) -> None:
    error = OSError(number, os.strerror(number))
    for wrapped in (error, raised_from(RuntimeError("download failed"), error)):
        kind = retry.classify(wrapped)
        assert (kind.kind, kind.errno) == ("disk", number)


@pytest.mark.parametrize(
    "error",
    [
        ConnectionResetError(errno.ECONNRESET, "reset"),
        OSError(errno.ENETUNREACH, "Network is unreachable"),
        TimeoutError(errno.ETIMEDOUT, "timed out"),
    ],
)
def test_a_socket_error_is_not_a_disk_error(error: OSError) -> None:
    assert retry.filesystem_errno(error) is None
    assert retry.classify(error).kind != "disk"
    if isinstance(error, ConnectionError | TimeoutError):
        assert retry.classify(error).kind == "transient"


def test_the_words_of_a_refused_write() -> None:
    cache = Path("/nowhere/cache")
    full = space.filesystem_error(
        errno.ENOSPC, label="org/x@main", cache_dir=cache, filename="model.safetensors", folder=cache / "b", needed=MiB
    )
    assert isinstance(full, DiskError) and isinstance(full, HfSnapshotError)
    assert str(full).startswith(
        "No space left on device (ENOSPC) while writing model.safetensors for org/x@main in /nowhere/cache/b: "
        "it still needs 1.0 MiB"
    )
    assert "`hf cache rm model/<org>/<name>`" in str(full) and "`hf cache prune`" in str(full)
    assert "--hf-cache-dir / HF_HUB_CACHE" in str(full)
    read_only = space.filesystem_error(errno.EROFS, label="org/x@main", cache_dir=cache, filename=None, folder=None)
    assert str(read_only) == (
        "Read-only file system (EROFS) for org/x@main in /nowhere/cache. Make the cache writable, "
        "or point --hf-cache-dir / HF_HUB_CACHE at a writable folder."
    )
    assert read_only.cause.startswith("Read-only file system (EROFS) in the cache /nowhere/cache.")


@pytest.mark.parametrize(
    ("free", "size", "fits"),
    [
        (10 * MiB, 9 * MiB, True),  # 1 MiB floor: exactly enough
        (10 * MiB, 9 * MiB + 1, False),  # rounded up to the 4 KiB block, it no longer fits
        (1000 * MiB, 980 * MiB, True),  # 1% of 980 MiB is 9.8 MiB
        (1000 * MiB, 991 * MiB, False),  # 1% of 991 MiB is 9.9 MiB: 1000.9 MiB needed
    ],
)
def test_the_margin_is_one_mib_or_one_percent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free: int, size: int, fits: bool
) -> None:
    monkeypatch.setattr(space, "_free_and_block", lambda folder: (free, 4096))
    repo = RepoCache(tmp_path, "org/x", "model")
    want = space.need(repo, "org/x@main", [ExpectedFile("w.bin", size, "a" * 64, True)])
    short = space.shortfall([want])
    assert (short is None) == fits
    if short is not None:
        assert short.free == free and short.to_fetch == size and short.margin >= MiB


def test_the_free_space_is_what_statvfs_says(tmp_path: Path) -> None:
    st = os.statvfs(tmp_path)
    assert space.free_bytes(tmp_path / "not" / "yet") == pytest.approx(st.f_bavail * st.f_frsize, rel=0.01)


def test_a_blob_two_snapshots_share_counts_once(tmp_path: Path) -> None:
    repo = RepoCache(tmp_path, "org/x", "model")
    shared = ExpectedFile("w.bin", 5 * MiB, "b" * 64, True)
    one = space.need(repo, "org/x@main", [shared])
    two = space.need(repo, "org/x@v1", [shared, ExpectedFile("c.json", 10, "c" * 40, False)])
    blobs = {b.key for n in (one, two) for b in n.blobs}
    assert len(blobs) == 2


# --- on a real small filesystem ---------------------------------------------------------------

MATERIALIZE = """
from pytest_hfsnapshot import materialize
snap = materialize({repo!r}, cache_dir=cache{kwargs})
return {{"source": snap.source, "size": snap.size, "files": list(snap.files)}}
"""


def materialize_in(mount: Path, repo: str, kwargs: str = "", **options: Any) -> dict[str, Any]:
    return in_small_fs(mount, MATERIALIZE.format(repo=repo, kwargs=kwargs), **options)


@small_fs
def test_a_repo_that_cannot_fit_fails_before_any_transfer(local_hub: LocalHub, tmp_path: Path) -> None:
    local_hub.add_repo("org/big", {"config.json": "{}", "model.safetensors": weights(8 * MiB, 1)})
    for attempt in (1, 2):
        local_hub.reset_counters()
        got = materialize_in(tmp_path / "disk", "org/big")
        error = got["error"]
        assert error["type"] == "DiskError", got
        assert error["errno"] == errno.ENOSPC
        message = error["message"]
        assert message.startswith("No space left on device (ENOSPC) for org/big@main: "), message
        assert (
            f"needed in {tmp_path / 'disk'} (8.0 MiB in 2 files to fetch: model.safetensors 8.0 MiB, "
            "config.json 2 B; plus a 1.0 MiB margin)" in message
        )
        assert "that filesystem has 6.0 MiB free. Nothing was transferred." in message
        assert "`hf cache rm model/<org>/<name>`" in message and "use space_check=False." in message
        # Free: the 6 MiB less the few blocks the revision, the listing and the locks took.
        assert error["needed"] > 8 * MiB and 6 * MiB - 64 * 1024 < error["free"] <= 6 * MiB
        # Not a byte of any file crossed the network, on either try: only the revision and the listing.
        assert local_hub.served("*/resolve/*") == 0, local_hub.requests
        assert local_hub.request_count("*/xorbs/*") == 0 and local_hub.request_count("*/reconstructions/*") == 0
        assert "traceback" in error and "Traceback" in error["traceback"]
        print(f"attempt {attempt}: {local_hub.bytes_served} bytes served (revision and listing):\n{message}")
    assert_nothing_partial(got["files"], "models--org--big", {8 * MiB})


@small_fs
def test_a_snapshot_that_fits_is_fetched_with_the_check_on(local_hub: LocalHub, tmp_path: Path) -> None:
    local_hub.add_repo("org/fits", {"config.json": "{}", "model.safetensors": weights(4 * MiB, 2)})
    got = materialize_in(tmp_path / "disk", "org/fits")
    assert got.get("result") == {
        "source": "download",
        "size": 4 * MiB + 2,
        "files": ["config.json", "model.safetensors"],
    }
    assert local_hub.served("*model.safetensors") >= 4 * MiB


@pytest.mark.transports("xet", "xet-noshare", "http")
@small_fs
def test_files_already_cached_do_not_count(local_hub: LocalHub, tmp_path: Path) -> None:
    # 8 MiB: after the first 3 MiB file, 3.5 MiB (the second file and the margin) fit; 6.5 would not.
    local_hub.add_repo(
        "org/two", {"config.json": "{}", "a.safetensors": weights(3 * MiB, 3), "b.safetensors": weights(3 * MiB, 4)}
    )
    got = in_small_fs(
        tmp_path / "disk",
        """
        from pytest_hfsnapshot import materialize
        first = materialize("org/two", cache_dir=cache, allow_patterns=["*.json", "a.safetensors"])
        full = materialize("org/two", cache_dir=cache)
        return [first.source, full.source, list(full.files)]
        """,
        size="8m",
    )
    assert got.get("result") == ["download", "download", ["a.safetensors", "b.safetensors", "config.json"]], got
    assert local_hub.request_count("*a.safetensors", method="GET", status=200) == 1


@pytest.mark.transports("xet", "xet-noshare", "http")
@small_fs
def test_a_file_of_the_shared_store_does_not_count(local_hub: LocalHub, transport: str, tmp_path: Path) -> None:
    """A second repo holding the same weights: on Xet with the shared store, its bytes are already here."""
    same = weights(3 * MiB, 5)
    local_hub.add_repo("org/first", {"config.json": "{}", "model.safetensors": same})
    local_hub.add_repo("org/second", {"config.json": '{"b": 1}', "model.safetensors": same})
    got = in_small_fs(
        tmp_path / "disk",
        """
        from pytest_hfsnapshot import materialize
        materialize("org/first", cache_dir=cache)
        return materialize("org/second", cache_dir=cache).source
        """,
    )
    if transport == "xet" and local_hub.xet:
        assert got.get("result") == "download", got
        assert local_hub.request_count("*/org/second/resolve/*/model.safetensors", method="GET", status=200) == 0
    else:
        # Each repo keeps its own copy there: the second does not fit, and is refused before its bytes.
        assert got["error"]["type"] == "DiskError", got
        assert local_hub.served("*/org/second/resolve/*/model.safetensors") == 0


@small_fs
def test_a_prefetch_that_cannot_fit_transfers_nothing(local_hub: LocalHub, tmp_path: Path) -> None:
    for number, name in enumerate(("org/a", "org/b", "org/c")):
        local_hub.add_repo(name, {"config.json": "{}", "model.safetensors": weights(3 * MiB, 10 + number)})
    local_hub.add_repo("org/small", {"config.json": "{}"})
    local_hub.reset_counters()
    got = in_small_fs(
        tmp_path / "disk",
        """
        import contextlib, io
        from pytest_hfsnapshot import materialize
        from pytest_hfsnapshot.cli import main
        materialize("org/small", cache_dir=cache)  # complete in the cache: no transfer, no space needed
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["prefetch", "--cache-dir", cache, "--repo", "org/a", "--repo", "org/b",
                         "--repo", "org/c", "--repo", "org/small"])
        return [code, out.getvalue()]
        """,
    )
    code, output = got["result"]
    print(output, f"bytes served: {local_hub.bytes_served}", sep="\n")
    assert code == 1
    assert local_hub.served("*/resolve/*/model.safetensors") == 0, local_hub.requests
    lines = output.splitlines()
    # One line for the three, with the totals and the biggest; the one already cached is ready.
    assert "hfsnapshot: 3 of 4 snapshots could not be made ready:" in lines
    grouped = [line for line in lines if line.startswith("  org/a@main, org/b@main, org/c@main  DiskError: ")]
    assert len(grouped) == 1, output
    # The free figure: the 6 MiB filesystem less what org/small and our small state files hold.
    assert re.search(
        re.escape(
            "No space left on device (ENOSPC) for the 3 snapshots to fetch: 10.0 MiB needed in "
            f"{tmp_path / 'disk'} (9.0 MiB in 6 files; the biggest: org/a@main 3.0 MiB, org/b@main 3.0 MiB, "
            "org/c@main 3.0 MiB; plus a 1.0 MiB margin) and that filesystem has "
        )
        + r"(5\.9|6\.0) MiB free\.",
        grouped[0],
    ), grouped[0]
    assert any("org/small@main ready (cache, 1 file" in line for line in lines), output


@pytest.mark.transports("xet", "xet-noshare", "http")
@small_fs
def test_a_disk_that_fills_during_the_transfer(local_hub: LocalHub, tmp_path: Path) -> None:
    """Another process takes the space once the transfer has started: the check passed, the write fails."""
    local_hub.add_repo("org/race", {"config.json": "{}", "model.safetensors": weights(4 * MiB, 20)})
    local_hub.slow(2 * MiB)  # about two seconds of transfer, time for the filler to strike
    got = in_small_fs(
        tmp_path / "disk",
        """
        import glob, subprocess, threading, time
        from pytest_hfsnapshot import materialize

        def fill():
            deadline = time.monotonic() + 60
            weights = cache + "/models--org--race/blobs/" + "[0-9a-f]" * 64 + ".*.incomplete"
            config = cache + "/models--org--race/snapshots/*/config.json"
            # Once config.json is in and the weights are on their way (huggingface_hub writes them
            # in 10 MiB chunks over plain HTTP, hf_xet as they arrive).
            while not (glob.glob(config) and glob.glob(weights)) and time.monotonic() < deadline:
                time.sleep(0.002)
            # Another process takes nearly all that is left (dd stops at the full disk).
            subprocess.run(["dd", "if=/dev/zero", "of=" + cache + "/filler", "bs=64k"], capture_output=True)

        filler = threading.Thread(target=fill)
        filler.start()
        try:
            return materialize("org/race", cache_dir=cache).source
        finally:
            filler.join()
        """,
    )
    error = got["error"]
    print(f"{local_hub.served('*model.safetensors')} weight bytes served:\n{error['message']}")
    assert error["type"] == "DiskError", got
    assert error["errno"] == errno.ENOSPC
    assert error["message"].startswith(
        f"No space left on device (ENOSPC) while writing model.safetensors for org/race@main in {tmp_path / 'disk'}/"
    ), error["message"]
    assert ": it still needs 4.0 MiB and that filesystem has " in error["message"]
    assert "`hf cache prune`" in error["message"]
    files = {p: s for p, s in got["files"].items() if p != "filler"}
    assert_nothing_partial(files, "models--org--race", {4 * MiB})


@pytest.mark.transports("xet", "xet-noshare", "http")
@small_fs
def test_with_the_check_off_the_transfer_starts_and_fails_plainly(local_hub: LocalHub, tmp_path: Path) -> None:
    local_hub.add_repo("org/big", {"config.json": "{}", "model.safetensors": weights(8 * MiB, 30)})
    got = materialize_in(tmp_path / "disk", "org/big", ", space_check=False")
    error = got["error"]
    print(f"{local_hub.served('*model.safetensors')} weight bytes served:\n{error['message']}")
    assert error["type"] == "DiskError", got
    assert error["message"].startswith(
        f"No space left on device (ENOSPC) while writing model.safetensors for org/big@main in {tmp_path / 'disk'}/"
    ), error["message"]
    assert "it still needs 8.0 MiB" in error["message"]
    assert local_hub.served("*model.safetensors") > 0
    assert_nothing_partial(got["files"], "models--org--big", {8 * MiB})


@small_fs
def test_a_read_only_cache(local_hub: LocalHub, tmp_path: Path) -> None:
    local_hub.add_repo("org/ro", {"config.json": "{}", "model.safetensors": weights(MiB, 40)})
    got = in_small_fs(
        tmp_path / "disk",
        """
        import subprocess
        from pytest_hfsnapshot import materialize
        subprocess.run(["mount", "-o", "remount,ro", cache], check=True)
        return materialize("org/ro", cache_dir=cache).source
        """,
    )
    error = got["error"]
    print(error["message"])
    assert error["type"] == "DiskError", got
    assert error["errno"] == errno.EROFS
    assert error["message"].startswith("Read-only file system (EROFS) while writing "), error["message"]
    assert "for org/ro@main in " in error["message"]
    assert error["message"].endswith(
        "Make the cache writable, or point cache_dir= / HF_HUB_CACHE at a writable folder."
    )
    assert local_hub.requests == []


@pytest.mark.transports("xet", "xet-noshare", "http")
@small_fs
def test_with_the_check_off_a_prefetch_fails_plainly_one_line_per_cause(local_hub: LocalHub, tmp_path: Path) -> None:
    for number, name in enumerate(("org/a", "org/b", "org/c")):
        local_hub.add_repo(name, {"config.json": "{}", "model.safetensors": weights(3 * MiB, 50 + number)})
    got = in_small_fs(
        tmp_path / "disk",
        """
        import contextlib, io
        from pytest_hfsnapshot.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["prefetch", "--cache-dir", cache, "--no-space-check",
                         "--repo", "org/a", "--repo", "org/b", "--repo", "org/c"])
        return [code, out.getvalue()]
        """,
    )
    code, output = got["result"]
    assert code == 1, output
    assert local_hub.served("*/resolve/*/model.safetensors") > 0
    report = output.split("could not be made ready:\n", 1)[1].splitlines()[:-1]
    assert len(report) == 1, output
    assert "DiskError: No space left on device (ENOSPC) " in report[0]
    # What is there is whole: no download in flight, every blob (repo or shared store) complete.
    files = got["files"]
    assert not [p for p in files if p.endswith(".incomplete")], files
    contents = [p for p in blob_files(files) if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", p.rsplit("/", 1)[1])]
    assert contents and all(files[p] in (-1, 2, 3 * MiB) for p in contents), files


@small_fs
def test_the_summary_says_a_full_disk_once_for_every_snapshot(local_hub: LocalHub, tmp_path: Path) -> None:
    for number, name in enumerate(("org/a", "org/b")):
        local_hub.add_repo(name, {"config.json": "{}", "model.safetensors": weights(8 * MiB, 60 + number)})
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(
        "from pytest_hfsnapshot import snapshot_fixture\na = snapshot_fixture('org/a')\nb = snapshot_fixture('org/b')\n"
    )
    (suite / "test_it.py").write_text("def test_a(a): pass\n\ndef test_b(b): pass\n\ndef test_both(a, b): pass\n")
    got = in_small_fs(
        tmp_path / "disk",
        f"""
        import subprocess, sys
        done = subprocess.run(
            [sys.executable, "-m", "pytest", {str(suite)!r}, "--hf-cache-dir", cache, "-p", "no:cacheprovider",
             "-n", "2", "--no-header"],
            capture_output=True, text=True, cwd={str(suite)!r},
        )
        return [done.returncode, done.stdout]
        """,
    )
    code, output = got["result"]
    print(output)
    assert code == 1
    section = output.split(" hf snapshots ", 1)[1].splitlines()[1:]
    section = section[: next(i for i, line in enumerate(section) if line.startswith("==="))]
    # Neither fits: each test says why in full, the summary says it once for both.
    assert not [line for line in section if line.startswith("org/")], section
    assert "Not ready: 2 snapshots" in section
    grouped = [line for line in section if "DiskError: " in line]
    assert grouped == [
        f"  org/a@main, org/b@main  DiskError: No space left on device (ENOSPC) in the cache {tmp_path / 'disk'}. "
        "Free space there: see what the cache holds with `hf cache ls`, remove repos you no longer need with "
        "`hf cache rm model/<org>/<name>` or old revisions with `hf cache prune`; or point --hf-cache-dir / "
        "HF_HUB_CACHE at a larger disk."
    ], section
    assert output.count("Nothing was transferred.") >= 2  # each failing test's own message


@pytest.mark.transports("xet", "xet-noshare", "http")
@small_fs
def test_prefetch_only_checks_the_set_and_the_option_turns_it_off(local_hub: LocalHub, tmp_path: Path) -> None:
    for number, name in enumerate(("org/a", "org/b")):
        local_hub.add_repo(name, {"config.json": "{}", "model.safetensors": weights(3 * MiB, 70 + number)})
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(
        "from pytest_hfsnapshot import snapshot_fixture\na = snapshot_fixture('org/a')\nb = snapshot_fixture('org/b')\n"
    )
    (suite / "test_it.py").write_text("def test_a(a): pass\n\ndef test_b(b): pass\n")
    script = f"""
    import subprocess, sys
    runs = []
    for extra in ([], ["--hf-no-space-check"]):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", {str(suite)!r}, "--hf-cache-dir", cache, "-p", "no:cacheprovider",
             "--hf-prefetch-only", *extra],
            capture_output=True, text=True, cwd={str(suite)!r},
        )
        runs.append([done.returncode, done.stdout])
    return runs
    """
    local_hub.reset_counters()
    got = in_small_fs(tmp_path / "disk", script, size="5m")
    (checked, checked_out), (unchecked, unchecked_out) = got["result"]
    assert checked == 1, checked_out
    assert "  org/a@main, org/b@main  DiskError: No space left on device (ENOSPC) for the 2 snapshots to fetch" in (
        checked_out
    )
    # Off, both transfers start side by side and meet the full disk (one of them may finish first).
    assert unchecked == 1, unchecked_out
    # Whichever write meets the full disk first: the weight file of one snapshot, or (when the other
    # has filled the disk meanwhile) one of the small files written around it (refs, listing, record).
    assert re.search(
        r"DiskError: No space left on device \(ENOSPC\) (while writing model\.safetensors for org/|in the cache )",
        unchecked_out,
    ), unchecked_out
    assert local_hub.served("*/resolve/*/model.safetensors") > 0
