"""Real storage for the fleet tests: moto's S3 server, buckets filled with rclone, read-only FUSE mounts.

Every piece is a process started here and stopped by the pid it was started with: moto's server
on 127.0.0.1, and one ``rclone mount`` per mount. ``AWS_CA_BUNDLE`` is removed from their
environment (with it set, rclone fails with ``LoadCustomCABundleError`` before it sends anything),
and loopback addresses bypass any proxy.

What a huggingface_hub cache looks like after ``rclone copy`` to a bucket (rclone 1.60): blobs and
the shared store's files are kept; symlinks (``snapshots/`` links, and a repo's ``blobs/<sha256>``
links into the shared store) are dropped without ``--links``, and with ``--links`` stored as
``NAME.rclonelink`` objects holding the target, which a mount shows as regular files.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

#: The rclone remote every config written here defines.
REMOTE = "fleet"
#: Where a cache goes inside its bucket (a writer job's ``rclone copy CACHE remote:bucket/hf-cache``).
PREFIX = "hf-cache"
READY_TIMEOUT = 60.0


class StorageError(RuntimeError):
    """A storage process did not start or a command failed; the message holds its output."""


def storage_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment for moto and rclone: no ``AWS_CA_BUNDLE``, no proxy for loopback."""
    env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update(extra or {})
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tail(path: Path, lines: int = 40) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    return ""


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Stop one process we started, by its pid: ``sig``, then SIGKILL if it lingers."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


def moto_problem() -> str | None:
    """Why moto's server cannot run here (None: it can)."""
    try:
        import moto.server  # noqa: F401
    except ImportError as error:
        return f"moto's server is not installed ({error}): pip install 'moto[server]' (the 'test' extra has it)"
    return None


class MotoServer:
    """moto's S3 server (``python -m moto.server``) on 127.0.0.1, on a free port."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> MotoServer:
        """Start it and return once it answers an HTTP request; StorageError if it does not."""
        # A port another process takes between the probe and moto's bind: try another one.
        for _ in range(3):
            self.port = free_port()
            with open(self.log, "ab") as out:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=storage_env(),
                )
            if self._answers():
                return self
            _stop(self.proc)
        raise StorageError(f"moto's server did not answer on 127.0.0.1:{self.port}:\n{_tail(self.log)}")

    def _answers(self) -> bool:
        assert self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(self.url + "/", timeout=2) as answer:
                    return bool(answer.status == 200)
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)


def fuse_problem() -> str | None:
    """Why ``rclone mount`` cannot run here (None: it can)."""
    for tool, package in (("rclone", "rclone"), (fusermount(), "fuse3")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install -y {package}; .ci/run does it)"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as error:
        return f"/dev/fuse cannot be opened here ({error.strerror}): FUSE mounts need it"
    return None


def fusermount() -> str:
    """fuse3's ``fusermount3``, or the older ``fusermount``."""
    return "fusermount3" if shutil.which("fusermount3") or not shutil.which("fusermount") else "fusermount"


def mounted(path: Path) -> bool:
    """Whether ``path`` is a mount point now, dead (``ENOTCONN``) or not: read from the mount table."""
    target = os.fspath(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        for line in table:
            point = line.split()[4].encode().decode("unicode_escape")  # "\040" is a space
            if point == target:
                return True
    return False


class Rclone:
    """The rclone command, with the remote ``fleet`` for an S3 server in a config file of its own."""

    def __init__(self, config: Path, endpoint: str) -> None:
        self.config = config
        self.endpoint = endpoint
        config.write_text(
            f"[{REMOTE}]\ntype = s3\nprovider = Other\nendpoint = {endpoint}\n"
            "access_key_id = test\nsecret_access_key = test\n",
            encoding="utf-8",
        )
        self.env = storage_env({"RCLONE_CONFIG": os.fspath(config)})

    def run(self, *args: str, timeout: float = 120.0) -> str:
        """Run ``rclone ARGS`` to the end; its output, or StorageError naming the command."""
        done = subprocess.run(["rclone", *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise StorageError(f"rclone {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
        return done.stdout + done.stderr

    def make_bucket(self) -> str:
        """A new empty bucket; its name."""
        name = f"fleet-{uuid.uuid4().hex[:12]}"
        self.run("mkdir", f"{REMOTE}:{name}")
        return name

    def copy(self, source: Path, bucket: str, *, links: bool, prefix: str = PREFIX) -> None:
        """``rclone copy [--links] SOURCE fleet:BUCKET/PREFIX``, as a writer job uploads a cache."""
        self.run("copy", *(["--links"] if links else []), os.fspath(source), f"{REMOTE}:{bucket}/{prefix}")

    def objects(self, bucket: str) -> dict[str, int]:
        """Every object of the bucket: key -> size."""
        out: dict[str, int] = {}
        for line in self.run("ls", f"{REMOTE}:{bucket}").splitlines():
            size, _, key = line.strip().partition(" ")
            if key:
                out[key] = int(size)
        return out

    def mount(self, bucket: str, mountpoint: Path, log: Path, *, expect: Sequence[str] = ()) -> RcloneMount:
        """``rclone mount --read-only fleet:BUCKET MOUNTPOINT``, returned once every name of ``expect``
        (paths relative to the mount point) shows; StorageError if rclone exits first or time runs out."""
        mountpoint.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                ["rclone", "mount", "--read-only", f"{REMOTE}:{bucket}", os.fspath(mountpoint)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        mount = RcloneMount(proc, mountpoint, log)
        try:
            mount.wait_for(expect)
        except BaseException:
            mount.stop()
            raise
        return mount


class RcloneMount:
    """One running ``rclone mount``: its pid, its mount point, and the ways a mount goes away."""

    def __init__(self, proc: subprocess.Popen[bytes], path: Path, log: Path) -> None:
        self.proc = proc
        self.path = path
        self.log = log

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_for(self, names: Sequence[str]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if mounted(self.path) and all(os.path.lexists(self.path / name) for name in names):
                return
            if self.proc.poll() is not None:
                raise StorageError(f"rclone mount exited {self.proc.returncode}:\n{_tail(self.log)}")
            if time.monotonic() > deadline:
                raise StorageError(f"rclone mount showed no {list(names)} in {READY_TIMEOUT:.0f}s:\n{_tail(self.log)}")
            time.sleep(0.05)

    def detach(self) -> None:
        """``fusermount -u -z``: the mount leaves the tree at once (new lookups see the empty mount
        point folder; open files keep working), and rclone exits once nothing uses it."""
        subprocess.run([fusermount(), "-u", "-z", os.fspath(self.path)], check=True, capture_output=True)

    def crash(self) -> None:
        """SIGKILL rclone: the mount stays in the table and every access fails with ``ENOTCONN``."""
        _stop(self.proc, signal.SIGKILL)

    def stop(self) -> None:
        """Unmount (lazily if busy) and stop rclone by its pid."""
        if mounted(self.path):
            done = subprocess.run([fusermount(), "-u", os.fspath(self.path)], capture_output=True)
            if done.returncode != 0:
                subprocess.run([fusermount(), "-u", "-z", os.fspath(self.path)], capture_output=True)
        _stop(self.proc)


def read_error(path: Path) -> int | None:
    """The errno that reading ``path`` (a file's first byte, a folder's names) fails with now (None: it
    succeeds). Not a stat: the kernel answers that from its cache for a second after a mount died."""
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as handle:
                handle.read(1)
    except OSError as error:
        return error.errno
    return None


#: The errors a dead FUSE mount answers with.
DEAD_MOUNT_ERRNOS = (errno.ENOTCONN, errno.EIO)
