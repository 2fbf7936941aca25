"""The fleet guide's commands (examples/shared-cache.md), run as written against moto's S3 server and
the local Hub, so that the guide cannot drift from what works.

The guide marks each block these tests run with ``<!-- fleet-guide: NAME -->`` on the line before
its fence. The only change made to a block before it runs: its absolute folders (``/mnt/...``,
``/opt/...``, ``/src/...``) are moved under the test's own folder. A Dockerfile block runs as an
image build would: ``COPY`` copies from the project, ``RUN`` runs, ``ENV`` sets the environment
of what runs in the image after it; ``FROM`` is the base image (here: this machine).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from conftest import file_fetches
from reliability.conftest import repo_files, tree_digest

from pytest_hfsnapshot.testing import half_written
from pytest_hfsnapshot.testing.hub import LocalHub

from .storage import MotoServer, fuse_problem, fusermount, mounted, storage_env

GUIDE = Path(__file__).resolve().parents[2] / "examples" / "shared-cache.md"
BLOCK = re.compile(r"<!-- fleet-guide: (?P<name>[\w-]+) -->\n```(?P<lang>\w+)\n(?P<body>.*?)\n```", re.S)
FOLDERS = re.compile(r"(?<![\w./-])/(mnt|opt|src)/")
FILE_BYTES = "*/resolve/*"
REPOS = ("org/fleet-tiny", "org/fleet-bert")
SUITE_CONFTEST = f"""
from pytest_hfsnapshot import snapshot_fixture

tiny = snapshot_fixture("{REPOS[0]}")
bert = snapshot_fixture("{REPOS[1]}", allow_patterns=["*.json", "*.safetensors"])
"""
SUITE_TESTS = """
import json


def test_tiny_config(tiny):
    assert json.loads((tiny / "config.json").read_text())["model_type"] == "bert"


def test_tiny_weights(tiny):
    assert (tiny / "model.safetensors").stat().st_size > 0


def test_bert_config(bert):
    assert (bert / "config.json").is_file()


def test_bert_weights(bert):
    assert (bert / "model.safetensors").stat().st_size > 0
"""

pytestmark = pytest.mark.transports("xet")


def guide_blocks() -> dict[str, tuple[str, str]]:
    """Marked blocks of the guide: name -> (language, text)."""
    found: dict[str, tuple[str, str]] = {}
    for match in BLOCK.finditer(GUIDE.read_text(encoding="utf-8")):
        assert match["name"] not in found, f"two blocks are marked {match['name']!r}"
        found[match["name"]] = (match["lang"], match["body"])
    return found


def localized(text: str, root: Path) -> str:
    """``text`` with its absolute folders moved under ``root``."""
    return FOLDERS.sub(lambda m: f"{root}/{m[1]}/", text)


class Guide:
    """The guide's blocks, run in a project folder holding a small suite that declares two snapshots."""

    def __init__(self, root: Path, hub: LocalHub) -> None:
        self.root = root
        self.blocks = guide_blocks()
        self.project = root / "project"
        tests = self.project / "tests"
        tests.mkdir(parents=True)
        (self.project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        (tests / "conftest.py").write_text(SUITE_CONFTEST, encoding="utf-8")
        (tests / "test_models.py").write_text(SUITE_TESTS, encoding="utf-8")
        self.files = {repo: repo_files(70 + n) for n, repo in enumerate(REPOS)}
        for repo, files in self.files.items():
            hub.add_repo(repo, files)

    def path(self, folder: str) -> Path:
        """Where an absolute folder of the guide is for this test."""
        return Path(localized(folder, self.root))

    def script(self, name: str, lang: str = "bash") -> str:
        found, body = self.blocks[name]
        assert found == lang, f"block {name!r} is {found}, not {lang}"
        return "set -euo pipefail\n" + localized(body, self.root)

    def start(
        self, name: str, env: Mapping[str, str], *, prefix: Sequence[str] = (), cwd: Path | None = None
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*prefix, "bash", "-c", self.script(name)],
            cwd=cwd or self.project,
            env=with_python(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def run(self, name: str, env: Mapping[str, str], *, cwd: Path | None = None) -> str:
        return finish(self.start(name, env, cwd=cwd), name)

    def build_image(self, env: dict[str, str]) -> dict[str, str]:
        """Run the Dockerfile block as a build would; the environment it leaves for the image's programs."""
        image_env = dict(env)
        _, body = self.blocks["image"]
        for line in localized(body, self.root).splitlines():
            instruction, _, rest = line.partition(" ")
            if instruction == "COPY":
                source, target = shlex.split(rest)
                shutil.copytree(self.project / source, target)
            elif instruction == "RUN":
                done = subprocess.run(
                    ["sh", "-c", rest],
                    cwd=self.root,
                    env=with_python(image_env),
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                assert done.returncode == 0, f"RUN {rest}: exited {done.returncode}\n{done.stdout}{done.stderr}"
            elif instruction == "ENV":
                key, _, value = rest.partition("=")
                image_env[key] = value
            else:
                assert instruction == "FROM", f"the test does not know how to build {line!r}"
        return image_env


def with_python(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` where the blocks' ``python`` is this interpreter (the one with the plugin installed)."""
    return {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', os.defpath)}"}


def finish(proc: subprocess.Popen[str], name: str, timeout: float = 600) -> str:
    """The output of a block once it ended; fails the test naming the block when it did not exit 0."""
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"the guide's block {name!r} did not finish in {timeout:.0f}s:\n{output[-4000:]}")
    assert proc.returncode == 0, f"the guide's block {name!r} exited {proc.returncode}:\n{output[-4000:]}"
    return output


@pytest.fixture
def guide(tmp_path: Path, local_hub: LocalHub) -> Guide:
    return Guide(tmp_path, local_hub)


def test_guide_marks_the_commands_of_each_way() -> None:
    assert {name: lang for name, (lang, _) in guide_blocks().items()} == {
        "nfs-runner": "bash",
        "rclone-remote": "bash",
        "writer-job": "bash",
        "runner-job": "bash",
        "image": "dockerfile",
        "image-runner": "bash",
    }


def assert_suite_passed(output: str) -> None:
    assert re.search(r"\b4 passed\b", output) and " failed" not in output, output[-4000:]


def test_nfs_runners_on_two_hosts_share_one_cache_with_leases(
    guide: Guide, local_hub: LocalHub, two_hosts: dict[str, list[str]]
) -> None:
    runners = [guide.start("nfs-runner", os.environ, prefix=prefix) for prefix in two_hosts.values()]
    outputs = [finish(runner, "nfs-runner") for runner in runners]

    for output in outputs:
        assert_suite_passed(output)
    for repo, files in guide.files.items():
        fetches = {path: file_fetches(local_hub, f"/{repo}/resolve/*/{path}") for path in files}
        assert fetches == dict.fromkeys(files, 1), f"{repo}: two hosts fetched a file twice: {fetches}"
    shared = guide.path("/mnt/shared/hf-cache")
    assert all((shared / f"models--{repo.replace('/', '--')}").is_dir() for repo in REPOS)


def _rclone_daemons(mountpoint: Path) -> list[int]:
    """Pids of the ``rclone mount --daemon`` processes serving ``mountpoint`` (started by a block)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if argv and os.path.basename(argv[0]) == b"rclone" and os.fsencode(mountpoint) in argv:
                    pids.append(int(entry.name))
    return pids


@pytest.fixture
def bucket_env(moto_server: MotoServer, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a job of the guide's (b): rclone's config file, the S3 endpoint and keys."""
    problem = fuse_problem()
    if problem is not None:
        pytest.skip(problem)
    env = storage_env(
        {
            "RCLONE_CONFIG": str(tmp_path / "rclone" / "rclone.conf"),
            "S3_ENDPOINT": moto_server.url,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
        }
    )
    yield env
    # A block that failed half-way leaves its mount: unmount it and stop its rclone by pid.
    for mountpoint in (tmp_path / "mnt").glob("*"):
        if mounted(mountpoint):
            subprocess.run([fusermount(), "-u", "-z", str(mountpoint)], capture_output=True)
        for pid in _rclone_daemons(mountpoint):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def test_writer_job_fills_a_bucket_that_runners_mount_read_only(
    guide: Guide, local_hub: LocalHub, bucket_env: dict[str, str]
) -> None:
    guide.run("rclone-remote", bucket_env)
    written = guide.run("writer-job", bucket_env)
    assert (guide.project / "hf-manifest.json").is_file()
    # The doctor checked every byte of the writer's cache before the upload.
    assert re.search(r"checked 2 snapshots of 2 repos in .*: 6 files, .* hashed\)", written), written[-4000:]
    assert "healthy: no problem found" in written, written[-4000:]
    local_hub.reset_counters()

    output = guide.run("runner-job", bucket_env)

    assert_suite_passed(output)
    assert local_hub.served(FILE_BYTES) == 0, "a runner downloaded what the bucket holds"
    layer = guide.path("/mnt/hf-models/hf-cache")
    section = output.split("hf snapshots", 1)[-1]
    assert str(layer) in section and all(repo in section for repo in REPOS), output[-4000:]
    assert not mounted(guide.path("/mnt/hf-models")), "the runner job left its mount"


def test_writer_job_publishes_nothing_when_the_doctor_finds_damage(
    guide: Guide, local_hub: LocalHub, bucket_env: dict[str, str]
) -> None:
    guide.run("rclone-remote", bucket_env)
    # moto's server lives for the session: a bucket another test's writer job filled is not this one's.
    subprocess.run(["rclone", "purge", "models:ci-models"], env=bucket_env, capture_output=True)
    cache = guide.path("/mnt/writer/hf-cache")
    prefetch, _ = guide.script("writer-job").split("pytest-hfsnapshot doctor", 1)
    done = subprocess.run(["bash", "-c", prefetch], cwd=guide.project, env=with_python(bucket_env), capture_output=True)
    assert done.returncode == 0, done.stdout + done.stderr
    half_written.corrupted_blob(cache, REPOS[1], "model.safetensors")

    writer = guide.start("writer-job", bucket_env)
    output, _ = writer.communicate(timeout=600)

    assert writer.returncode == 1, output[-4000:]
    assert re.search(rf"wrong-hash +{REPOS[1]}@\w+ model.safetensors: sha256 mismatch", output), output[-4000:]
    listed = subprocess.run(["rclone", "lsf", "models:"], env=bucket_env, capture_output=True, text=True)
    assert "ci-models" not in listed.stdout, "the damaged cache was uploaded"


def test_layer_baked_into_an_image_serves_its_tests(guide: Guide, local_hub: LocalHub) -> None:
    image_env = guide.build_image(dict(os.environ))
    layer = guide.path("/opt/hf-layer")
    assert image_env["HFSNAPSHOT_CACHE_LAYERS"] == str(layer)
    before = tree_digest(layer)
    local_hub.reset_counters()

    output = guide.run("image-runner", image_env, cwd=guide.root)

    assert_suite_passed(output)
    assert local_hub.served(FILE_BYTES) == 0, "the image's tests downloaded what its layer holds"
    assert str(layer) in output.split("hf snapshots", 1)[-1], output[-4000:]
    assert tree_digest(layer) == before, "the tests wrote into the image's layer"
