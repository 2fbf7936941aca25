"""The demo, ``python -m pytest_hfsnapshot.demo``: the example suite against a local Hub, one repo damaged."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from huggingface_hub import snapshot_download
from huggingface_hub.utils.tqdm import disable_progress_bars

from ..core.cache.formats import count, human_size
from ..testing.half_written import truncated_blob
from ..testing.hub import LocalHub
from ..testing.serve import client_exports, load_folder

SUITE = Path(__file__).parent / "suite"

TINY = "demo/tiny-model"
CACHED = "demo/cached-model"
LARGE = "demo/large-model"
GATED = "demo/gated-model"
WEIGHTS = "model.safetensors"


def safetensors_bytes(name: str, dtype: str, shape: tuple[int, int]) -> bytes:
    """A valid .safetensors file holding one tensor of the given dtype and shape (deterministic bytes)."""
    itemsize = {"F32": 4, "F16": 2}[dtype]
    size = shape[0] * shape[1] * itemsize
    header = json.dumps(
        {"__metadata__": {"format": "pt"}, name: {"dtype": dtype, "shape": list(shape), "data_offsets": [0, size]}},
        separators=(",", ":"),
    ).encode()
    header += b" " * (-len(header) % 8)  # the format pads the header to 8 bytes
    data = bytes(range(256)) * (size // 256)
    return struct.pack("<Q", len(header)) + header + data


def model_files(model_type: str, weights: bytes, **config: object) -> dict[str, bytes | str]:
    return {
        "config.json": json.dumps({"model_type": model_type, **config}, indent=2),
        "tokenizer_config.json": json.dumps({"model_max_length": 512, "tokenizer_class": "PreTrainedTokenizerFast"}),
        WEIGHTS: weights,
    }


def write_demo_repos(root: Path) -> dict[str, int]:
    """Write the demo's repos as a folder ``serve`` can serve; returns the size of each repo's weight file."""
    repos = {
        TINY: model_files("demo", safetensors_bytes("embeddings.weight", "F32", (256, 512)), hidden_size=512),
        CACHED: model_files("demo", safetensors_bytes("embeddings.weight", "F16", (256, 512)), hidden_size=512),
        LARGE: model_files("demo", safetensors_bytes("embeddings.weight", "F32", (2048, 1024)), hidden_size=1024),
        GATED: model_files("demo", safetensors_bytes("embeddings.weight", "F32", (64, 64))),
    }
    for repo_id, files in repos.items():
        folder = root / repo_id
        folder.mkdir(parents=True)
        for name, content in files.items():
            (folder / name).write_bytes(content.encode() if isinstance(content, str) else content)
    (root / GATED / ".gated").touch()
    return {repo_id: len(files[WEIGHTS]) for repo_id, files in repos.items() if repo_id != GATED}


def add_demo_repos(hub: LocalHub, root: Path) -> dict[str, int]:
    """Write the demo's repos under ``root`` and serve them on ``hub``; the size of each weight file."""
    sizes = write_demo_repos(root)
    load_folder(hub, root)
    return sizes


def pytest_command(suite: Path, extra: Sequence[str]) -> list[str]:
    """The child's command line: the suite on 2 xdist workers (one process without xdist)."""
    command = [sys.executable, "-m", "pytest"]
    if importlib.util.find_spec("xdist") is not None:
        command += ["-n", "2"]
    command += ["-p", "no:cacheprovider", "-v", "-rs", "--rootdir", str(suite)]
    if sys.stdout.isatty():
        command.append("--color=yes")
    return [*command, *extra, str(suite)]


def run_streaming(command: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Run ``command``, echoing its output as it comes; returns its exit code and output."""
    lines = []
    with subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as child:
        assert child.stdout is not None
        for line in child.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    return child.returncode, "".join(lines)


def explain(hub: LocalHub, output: str, weight_sizes: dict[str, int], workers: bool) -> list[str]:
    """What the run showed, in words, with the local Hub's counters."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)

    def fetches(repo_id: str, filename: str = "*") -> int:
        # One file body per fetch, whichever way the client took: a Xet reconstruction, the CDN,
        # or resolve itself (the local Hub counts the first two as that file's resolve path).
        return hub.request_count(f"/{repo_id}/resolve/*/{filename}", method="GET", status=200)

    tiny = f"{TINY}: its 3 tests share one verified snapshot"
    # The summary row names the worker that downloaded and how many others waited for it.
    row = re.search(rf"^{re.escape(TINY)}@main .*? by (gw\d+); (\d+) others? waited", plain, re.MULTILINE)
    if row:
        others = int(row.group(2))
        tiny = (
            f"{TINY}: {count(1 + others, 'worker')} asked for it; {row.group(1)} downloaded it while the other"
            f"{'s' if others != 1 else ''} waited on the repo lock"
        )
    elif workers:
        tiny += " (one worker ran them all this time)"
    weight_fetches = fetches(TINY, WEIGHTS)
    via = "through Xet (hf_xet: a reconstruction, then ranged xorb reads from the CAS)" if _xet(hub) else "over HTTP"
    refused = [path for _, path, status in hub.requests if status == 403 and path.startswith(f"/{GATED}/")]
    retried = "none asked twice" if len(set(refused)) == len(refused) else "some asked again"
    return [
        'The "hfsnapshot:" header line: the cache, the endpoint, offline mode, and whether a token is set.',
        f"{tiny}. The weight file ({human_size(weight_sizes[TINY])}) crossed the network "
        f"{_times(weight_fetches)}, {via}: {weight_fetches} fetch of {WEIGHTS} in all.",
        f"{CACHED}: the cache held {WEIGHTS} cut to half its size (a disk that filled up mid-write). "
        f'The size check caught it and only that file was fetched again ({fetches(CACHED)} fetch): source "repair".',
        f"{LARGE} with metadata_only=True: {human_size(hub.served(f'/{LARGE}/resolve/*/{WEIGHTS}'))} of its "
        f"{human_size(weight_sizes[LARGE])} weight file served; config and tokenizer only.",
        f"{GATED}: the Hub answered 403 GatedRepo ({count(len(refused), 'refused request')}, "
        f"{retried}); the test was skipped with the reason shown, counted under 'Hub access refused'.",
        f"The local Hub served {count(len(hub.requests), 'request')} ({human_size(hub.served())}) for the whole run.",
    ]


def _xet(hub: LocalHub) -> bool:
    """Whether the suite's client downloaded the hub's weight files through hf_xet."""
    return hub.xet and os.environ.get("HF_HUB_DISABLE_XET", "").strip().lower() not in ("1", "true", "yes", "on")


def _times(count: int) -> str:
    return {0: "zero times", 1: "once", 2: "twice"}.get(count, f"{count} times")


def main(argv: Sequence[str] = ()) -> int:
    """Run the demo; extra arguments go to pytest (e.g. ``-x``). Returns pytest's exit code."""
    with tempfile.TemporaryDirectory(prefix="hfsnapshot-demo-") as scratch:
        root = Path(scratch).resolve()
        suite = root / "suite"
        shutil.copytree(SUITE, suite, ignore=shutil.ignore_patterns("__pycache__"))
        with LocalHub() as hub, hub.configure_client(root / "hf-cache") as cache:
            weight_sizes = add_demo_repos(hub, root / "repos")
            # An earlier run filled the cache, then a full disk cut the weight file in half.
            disable_progress_bars()
            snapshot_download(CACHED)
            truncated_blob(cache, CACHED, WEIGHTS)
            hub.reset_counters()

            # huggingface_hub reads these once, at import: the child gets them before it starts.
            env = dict(os.environ)
            # What `pytest-hfsnapshot serve` tells a user to export, without the token: the
            # gated repo is to be refused, as on a fork PR without secrets.
            env.update(client_exports(hub, token=False))
            env.update(
                HF_HUB_CACHE=str(cache),
                HF_HUB_OFFLINE="0",
                HF_HUB_DISABLE_TELEMETRY="1",
                HF_HUB_DISABLE_PROGRESS_BARS="1",
                PYTHONDONTWRITEBYTECODE="1",
            )
            for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
                env.pop(name, None)
            command = pytest_command(suite, argv)
            workers = "-n" in command
            print(
                "pytest-hfsnapshot demo\n"
                f"A local Hub is serving the repos in {root / 'repos'} at {hub.url} (in this process, as\n"
                f"`pytest-hfsnapshot serve {root / 'repos'}` would; nothing goes to huggingface.co).\n"
                + (
                    "As on huggingface.co, its weight files are stored in Xet: the client downloads them with\n"
                    "hf_xet from a content-addressed store, into huggingface_hub's shared blob store.\n"
                    if _xet(hub)
                    else "Its weight files are served over plain HTTP (hf_xet is not installed, or Xet is off).\n"
                )
                + "Repos:\n"
                f"  {TINY:18}  config.json, tokenizer_config.json, {WEIGHTS} ({human_size(weight_sizes[TINY])})\n"
                f"  {CACHED:18}  the same files, already cached, but {WEIGHTS} cut in half\n"
                f"  {LARGE:18}  config.json, tokenizer_config.json, {WEIGHTS} ({human_size(weight_sizes[LARGE])})\n"
                f"  {GATED:18}  gated (accept-the-conditions repo); no token here\n"
                f"Cache: {cache}\n"
                f"Running the example suite ({SUITE}) "
                f"{'on 2 xdist workers' if workers else 'in one process (install pytest-xdist for 2 workers)'}:\n"
                f"  HF_ENDPOINT={hub.url} HF_HUB_CACHE={cache} python {' '.join(command[1:])}\n",
                flush=True,
            )
            code, output = run_streaming(command, env, root)
            print("\nWhat you just saw:")
            for line in explain(hub, output, weight_sizes, workers):
                print(f"  * {line}")
            print(f"pytest exited with {code}.")
    return code
