"""``pytest-hfsnapshot serve DIR``: a folder of repos served as a local Hub for a whole session."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_hfsnapshot.testing.hub import LocalHub
from pytest_hfsnapshot.testing.serve import load_folder

CONFIG = json.dumps({"model_type": "demo"})


def make_repos(root: Path) -> None:
    (root / "org" / "tiny").mkdir(parents=True)
    (root / "org" / "tiny" / "config.json").write_text(CONFIG)
    (root / "org" / "tiny" / "model.safetensors").write_bytes(b"\x02" * (1 << 20))
    (root / "org" / "tiny" / "sub").mkdir()
    (root / "org" / "tiny" / "sub" / "vocab.txt").write_text("a\nb\n")
    (root / "org" / "gated").mkdir(parents=True)
    (root / "org" / "gated" / "config.json").write_text(CONFIG)
    (root / "org" / "gated" / ".gated").touch()
    (root / "org" / "secret").mkdir(parents=True)
    (root / "org" / "secret" / "config.json").write_text(CONFIG)
    (root / "org" / "secret" / ".private").touch()
    (root / "datasets" / "org" / "corpus").mkdir(parents=True)
    (root / "datasets" / "org" / "corpus" / "README.md").write_text("# corpus\n")
    (root / "datasets" / "org" / "corpus" / "data.jsonl").write_text('{"x": 1}\n')


class Served:
    def __init__(self, process: subprocess.Popen[str], lines: list[str]) -> None:
        self.process = process
        self.lines = lines
        self.exports = dict(re.findall(r"^export (\w+)=(\S+)$", "\n".join(lines), re.MULTILINE))

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
        env.update(self.exports)
        return env


def start_serve(args: list[str]) -> Served:
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_hfsnapshot", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if "until interrupted" in line:
            return Served(process, lines)
    process.kill()
    pytest.fail("serve did not come up:\n" + "\n".join(lines))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    make_repos(tmp_path / "repos")
    server = start_serve([str(tmp_path / "repos")])
    yield server
    server.process.send_signal(signal.SIGINT)
    assert server.process.wait(timeout=30) == 0


def test_serve_prints_the_exports_then_one_line_per_repo(served: Served) -> None:
    text = "\n".join(served.lines)
    assert re.search(r"^export HF_ENDPOINT=http://127\.0\.0\.1:\d+$", text, re.MULTILINE), text
    assert re.search(r"^export HF_TOKEN=hf_\w+$", text, re.MULTILINE), text
    last_export = max(i for i, line in enumerate(served.lines) if line.startswith("export "))
    repo_lines = [line for line in served.lines[last_export:] if re.search(r"org/(tiny|gated|secret|corpus)", line)]
    assert len(repo_lines) == 4, text
    assert any("datasets/org/corpus" in line for line in repo_lines)
    assert any("org/gated" in line and "gated" in line.replace("org/gated", "") for line in repo_lines)
    assert any("org/secret" in line and "private" in line for line in repo_lines)


def test_a_whole_session_with_xdist_workers_runs_against_it(served: Served, tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(
        "from pytest_hfsnapshot import snapshot_fixture\n\n"
        "tiny = snapshot_fixture('org/tiny')\n"
        "corpus = snapshot_fixture('org/corpus', repo_type='dataset')\n"
        "gated = snapshot_fixture('org/gated')\n"
        "secret = snapshot_fixture('org/secret', private=True)\n"
    )
    (suite / "test_it.py").write_text(
        "def test_tiny(tiny):\n"
        "    assert tiny.files == ('config.json', 'model.safetensors', 'sub/vocab.txt')\n\n"
        "def test_corpus(corpus):\n    assert (corpus / 'data.jsonl').read_text() == '{\"x\": 1}\\n'\n\n"
        "def test_gated(gated):\n    assert gated.files == ('config.json',)\n\n"
        "def test_secret(secret):\n    assert secret.files == ('config.json',)\n"
    )
    env = served.env
    env["HF_HUB_CACHE"] = str(tmp_path / "cache")
    command = [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-rs", str(suite)]
    with_token = subprocess.run(command, env=env, cwd=suite, capture_output=True, text=True, timeout=300)
    assert with_token.returncode == 0, with_token.stdout + with_token.stderr
    assert "4 passed" in with_token.stdout
    env.pop("HF_TOKEN")
    env["HF_HUB_CACHE"] = str(tmp_path / "cache2")
    without = subprocess.run(command, env=env, cwd=suite, capture_output=True, text=True, timeout=300)
    assert without.returncode == 0, without.stdout + without.stderr
    assert "2 passed, 2 skipped" in without.stdout, without.stdout


def test_marker_files_are_not_served_and_xet_is_the_default(tmp_path: Path) -> None:
    make_repos(tmp_path / "repos")
    with LocalHub() as hub:
        repos = load_folder(hub, tmp_path / "repos")
        assert {(r.repo_type, r.repo_id) for r in repos} == {
            ("model", "org/tiny"),
            ("model", "org/gated"),
            ("model", "org/secret"),
            ("dataset", "org/corpus"),
        }
        assert {r.repo_id: r.access for r in repos}["org/gated"] == "gated"
        assert {r.repo_id: r.access for r in repos}["org/secret"] == "private"
        with hub.configure_client(tmp_path / "cache"):
            from huggingface_hub import HfApi

            api = HfApi(token=hub.token)
            assert sorted(api.list_repo_files("org/gated")) == ["config.json"]
            assert sorted(api.list_repo_files("org/secret")) == ["config.json"]
            assert sorted(api.list_repo_files("org/tiny")) == ["config.json", "model.safetensors", "sub/vocab.txt"]
    assert hub.xet == _xet_importable()


def _xet_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("hf_xet") is not None


def test_port_and_no_xet(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    make_repos(tmp_path / "repos")
    server = start_serve([str(tmp_path / "repos"), "--port", str(port), "--no-xet"])
    try:
        assert server.exports["HF_ENDPOINT"] == f"http://127.0.0.1:{port}"
        assert any("plain HTTP" in line for line in server.lines), server.lines
    finally:
        server.process.send_signal(signal.SIGINT)
        server.process.wait(timeout=30)


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda root: None, "does not exist"),
        (lambda root: root.mkdir(), "holds no repo"),
        (lambda root: (root.mkdir(), (root / "file.txt").write_text("x")), "holds no repo"),
    ],
)
def test_bad_folders_are_clear_errors(tmp_path: Path, setup: object, message: str) -> None:
    root = tmp_path / "repos"
    setup(root)  # type: ignore[operator]
    result = subprocess.run(
        [sys.executable, "-m", "pytest_hfsnapshot", "serve", str(root)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert str(root) in result.stderr


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_repos_sharing_content_download_on_every_transport(local_hub: LocalHub, tmp_path: Path) -> None:
    # The demo's repos hold the same byte pattern at several sizes: Xet dedupes them into shared,
    # overlapping chunk runs of one xorb, which the CAS must answer with one fetch entry per run
    # (hf_xet panicked on the overlapping entries the local Hub used to send).
    from huggingface_hub import snapshot_download

    from pytest_hfsnapshot.demo import write_demo_repos

    write_demo_repos(tmp_path / "repos")
    repos = load_folder(local_hub, tmp_path / "repos")
    for repo in repos:
        if repo.access == "public":
            folder = Path(snapshot_download(repo.repo_id))
            for path in (tmp_path / "repos" / repo.repo_id).iterdir():
                assert (folder / path.name).read_bytes() == path.read_bytes()
