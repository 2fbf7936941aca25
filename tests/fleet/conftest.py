"""Fixtures for caches shared by a fleet: an S3 server, buckets, rclone mounts, other hosts, read-only binds.

Each one starts what it needs (moto's server, ``rclone mount``, ``unshare`` children) and stops it
by the pid it started, and skips with the reason where this machine cannot run it (CI here can).
Another test folder uses them by importing them into its ``conftest.py``::

    from fleet.conftest import moto_server, rclone, rclone_mount, s3_bucket  # noqa: F401

- ``moto_server`` (session): moto's S3 server on 127.0.0.1, ready once it answers.
- ``rclone``: the rclone command with the remote ``fleet`` (``type = s3``, ``provider = Other``,
  the server's endpoint, keys "test") in a config file of the test's own (``RCLONE_CONFIG``).
- ``prefetched(*specs)``: a new cache folder filled by ``pytest-hfsnapshot prefetch --repo SPEC ...``
  against the local Hub, as a writer job fills the cache it then uploads.
- ``s3_bucket(cache, links=...)``: a new bucket holding ``cache`` under ``hf-cache/``, uploaded
  with ``rclone copy`` (``--links`` or not).
- ``rclone_mount(bucket)``: ``rclone mount --read-only`` of the bucket, returned once it shows every
  object; ``.layer`` is the cache folder in it; ``.detach()`` (``fusermount -u -z``) and ``.crash()``
  (SIGKILL of rclone: ``ENOTCONN``) make it die; unmounted and stopped at teardown.
- ``s3_layer(cache, links=...)``: the three above in one call.
- ``two_hosts``: command prefixes running a program as host ``fleet-a`` or ``fleet-b`` (``unshare -u``).
- ``read_only_bind(source, hostname=None)``: a prefix running a program in its own mount namespace
  (``unshare -m``) where ``source`` is bind-mounted read-only at the returned folder.
- ``children`` (from the reliability suite): child interpreters that report what ``materialize`` did.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hosts import host_prefix, namespace_prefix, namespace_problem
from reliability.conftest import children  # noqa: F401  (the fixture, for the tests of this folder)

from pytest_hfsnapshot.testing.hub import LocalHub

from .storage import PREFIX, MotoServer, Rclone, RcloneMount, StorageError, fuse_problem, moto_problem

HOSTS = ("fleet-a", "fleet-b")


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:.0f}s: {what}")
        time.sleep(0.02)


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """moto's S3 server on 127.0.0.1 for the whole session (each xdist worker has its own)."""
    problem = moto_problem()
    if problem is not None:
        pytest.skip(problem)
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def rclone(moto_server: MotoServer, tmp_path: Path) -> Rclone:
    """rclone with the remote ``fleet`` for ``moto_server``, in a config file of this test's own."""
    if shutil.which("rclone") is None:
        pytest.skip("rclone is not installed (apt-get install -y rclone; .ci/run does it)")
    return Rclone(tmp_path / "rclone.conf", moto_server.url)


@pytest.fixture
def prefetched(local_hub: LocalHub, tmp_path: Path) -> Callable[..., Path]:
    """``prefetched("org/name@rev", ...)``: a new cache that ``pytest-hfsnapshot prefetch --repo`` filled."""
    numbers = itertools.count(1)

    def prefetch(*specs: str) -> Path:
        cache = tmp_path / f"writer-cache-{next(numbers)}"
        repos = [arg for spec in specs for arg in ("--repo", spec)]
        done = subprocess.run(
            [sys.executable, "-m", "pytest_hfsnapshot", "prefetch", *repos, "--cache-dir", os.fspath(cache)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            pytest.fail(f"prefetch {' '.join(specs)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return cache

    return prefetch


@pytest.fixture
def s3_bucket(rclone: Rclone) -> Callable[..., str]:
    """``s3_bucket(cache, links=True)``: a new bucket holding ``cache`` under ``hf-cache/`` (``rclone copy``)."""

    def fill(cache: Path, *, links: bool) -> str:
        bucket = rclone.make_bucket()
        rclone.copy(cache, bucket, links=links)
        return bucket

    return fill


@dataclasses.dataclass
class Mount:
    """A read-only rclone mount of a bucket; ``layer`` is the cache folder it shows."""

    rclone: RcloneMount
    bucket: str

    @property
    def path(self) -> Path:
        return self.rclone.path

    @property
    def layer(self) -> Path:
        return self.rclone.path / PREFIX

    @property
    def pid(self) -> int:
        return self.rclone.pid

    def detach(self) -> None:
        self.rclone.detach()

    def crash(self) -> None:
        self.rclone.crash()


@pytest.fixture
def rclone_mount(rclone: Rclone, tmp_path: Path) -> Iterator[Callable[[str], Mount]]:
    """``rclone_mount(bucket)``: ``rclone mount --read-only`` of it, once the mount shows every object."""
    problem = fuse_problem()
    if problem is not None:
        pytest.skip(problem)
    started: list[RcloneMount] = []
    numbers = itertools.count(1)

    def mount(bucket: str) -> Mount:
        n = next(numbers)
        objects = list(rclone.objects(bucket))
        running = rclone.mount(bucket, tmp_path / f"mnt-{n}", tmp_path / f"rclone-mount-{n}.log", expect=objects)
        started.append(running)
        return Mount(running, bucket)

    yield mount
    errors = []
    for running in started:
        try:
            running.stop()
        except (OSError, StorageError) as error:
            errors.append(error)
    assert not errors, f"mounts left behind: {errors}"


@pytest.fixture
def s3_layer(s3_bucket: Callable[..., str], rclone_mount: Callable[[str], Mount]) -> Callable[..., Mount]:
    """``s3_layer(cache, links=True)``: ``cache`` uploaded to a new bucket and mounted read-only."""

    def make(cache: Path, *, links: bool = True) -> Mount:
        return rclone_mount(s3_bucket(cache, links=links))

    return make


@pytest.fixture
def two_hosts() -> dict[str, list[str]]:
    """Command prefixes that run a program as host ``fleet-a`` or ``fleet-b`` (``unshare -u``, root)."""
    return {name: host_prefix(name) for name in HOSTS}


@pytest.fixture
def read_only_bind(tmp_path: Path) -> Callable[..., tuple[list[str], Path]]:
    """``read_only_bind(source, hostname=None) -> (prefix, folder)``: behind ``prefix`` a program runs
    in its own mount namespace (``unshare -m``), where ``folder`` shows ``source`` read-only."""
    numbers = itertools.count(1)

    def bind(source: Path, hostname: str | None = None) -> tuple[list[str], Path]:
        target = tmp_path / f"ro-{next(numbers)}"
        target.mkdir()
        prefix = namespace_prefix(hostname=hostname, read_only={source: target})
        problem = namespace_problem(prefix, ["true"])
        if problem is not None:
            pytest.skip(problem)
        return prefix, target

    return bind
