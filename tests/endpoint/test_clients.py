"""Session processes whose Hub client is not huggingface_hub: Rust ``hf-hub``, as TGI's router uses it.

The router here is outlines-core's ``Vocabulary.from_pretrained``: tokenizers' Rust ``from_pretrained``
fetches ``tokenizer.json`` with ``hf-hub``'s ``ApiBuilder::from_env()``, which reads ``HF_ENDPOINT``.
No Python code of huggingface_hub runs for that file, so only the session endpoint can see it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_hfsnapshot.plugin.implicit import offline_miss_line
from pytest_hfsnapshot.testing.hub import LocalHub

from .test_session import TIMEOUT, implicit_rows, prefetched, run, run_offline

pytest.importorskip("outlines_core")

#: A byte-pair tokenizer of three tokens; ``generation_config.json`` names ``b`` as its EOS.
TOKENIZER: dict[str, object] = {
    "version": "1.0",
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]},
    "added_tokens": [],
    "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    **dict.fromkeys(("normalizer", "pre_tokenizer", "post_processor", "truncation", "padding")),
}
FILES = {"tokenizer.json": json.dumps(TOKENIZER), "generation_config.json": '{"eos_token_id": 1}'}

ROUTER_SUITE = '''
import os, subprocess, sys

ROUTER = """
import sys
from outlines_core import Vocabulary
vocabulary = Vocabulary.from_pretrained(sys.argv[1])
print(vocabulary.get_eos_token_id(), vocabulary.get("ab"))
"""

# outlines-core reads the EOS id with ApiBuilder::new(), which hard-codes huggingface.co but looks in
# its cache (~/.cache/huggingface/hub) first: the deployment puts that file there beforehand, through
# the endpoint. The router's home is its own, and from_env's cache ($HF_HOME/hub) is the same folder.
SEED = "import sys; from huggingface_hub import hf_hub_download as get; get(*sys.argv[1:3], cache_dir=sys.argv[3])"


def route(repo, home):
    env = dict(os.environ, HOME=str(home), HF_HOME=str(home / ".cache" / "huggingface"))
    return subprocess.run([sys.executable, "-c", ROUTER, repo], env=env, capture_output=True, text=True, timeout=240)


def test_router(tmp_path):
    cache = tmp_path / ".cache" / "huggingface" / "hub"
    seeded = subprocess.run([sys.executable, "-c", SEED, "org/router", "generation_config.json", str(cache)])
    assert seeded.returncode == 0
    done = route("org/router", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "[2]"]


def test_unlisted(tmp_path):
    done = route("org/unlisted", tmp_path)
    assert done.returncode == 0, done.stderr
'''


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_manage_gets_a_rust_client_past_a_503_and_a_cut_and_records_its_file_under_its_test(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    commit = local_hub.add_repo("org/router", FILES)
    tokenizer = "*/org/router/resolve/*/tokenizer.json"
    local_hub.fail(tokenizer, 503, times=2)
    local_hub.cut(tokenizer, 64)
    pytester.makepyfile(test_router=ROUTER_SUITE)
    pins = pytester.path / "pins.json"

    result = run(
        pytester,
        local_hub,
        "--hf-implicit=manage",
        f"--hf-pins={pins}",
        "--hf-update-pins",
        "test_router.py::test_router",
    )

    result.assert_outcomes(passed=1)
    assert local_hub.pending_faults() == []
    assert implicit_rows(result.stdout.str())["org/router@main"].endswith(
        " 1 test (first: test_router.py::test_router)"
    )
    recorded = {entry["repo_id"]: entry for entry in json.loads(pins.read_text())}
    assert recorded["org/router"]["commit"] == commit
    assert recorded["org/router"]["files"] == sorted(FILES)


def test_offline_a_rust_client_is_served_from_the_cache_and_its_miss_is_named_in_its_test(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    local_hub.add_repo("org/router", FILES)
    pytester.makepyfile(test_router=ROUTER_SUITE)
    pins = pytester.path / "pins.json"
    recorded = run(pytester, local_hub, f"--hf-pins={pins}", "--hf-update-pins", "test_router.py::test_router")
    recorded.assert_outcomes(passed=1)
    cold = prefetched(pytester, local_hub, pins)

    offline = run_offline(pytester, cold, pins)

    offline.assert_outcomes(passed=1, failed=1)
    assert local_hub.requests == []
    assert offline_miss_line("org/unlisted@main", "tokenizer.json", pins) in offline.stdout.str()


# --- llama.cpp's -hf ---------------------------------------------------------------------------------

#: llama.cpp's ``llama-tokenize``: ``-hf`` asks ``/api/models/REPO/refs`` for ``main``'s commit, lists the
#: tree at that commit and downloads the GGUF through ``/resolve/COMMIT/``, into ``HF_HUB_CACHE``.
#: Not installed by ``tox`` (there is no llama.cpp wheel with its tools): the tests run where it is on PATH.
LLAMA = shutil.which("llama-tokenize")
needs_llama = pytest.mark.skipif(LLAMA is None, reason="llama.cpp's llama-tokenize is not on PATH")
#: A vocabulary-only GGUF (bert's, from llama.cpp's own test models): what ``llama-tokenize`` loads.
VOCAB = "ggml-vocab-bert-bge.gguf"

LLAMA_SUITE = f"""
import subprocess

def tokenize(repo):
    done = subprocess.run([{LLAMA!r}, "-hf", repo + ":Q8_0", "-p", "hello world", "--ids", "--log-disable"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()

def test_llama():
    assert tokenize("org/vocab-GGUF") == "[101, 7592, 2088, 102]"
"""


def vocab_gguf() -> dict[str, bytes | str]:
    assert LLAMA is not None
    found = [p for p in (Path(LLAMA).parent, *Path(LLAMA).parents) if (p / VOCAB).is_file()]
    if not found:
        pytest.skip(f"{VOCAB} is not beside llama-tokenize")
    return {"vocab-Q8_0.gguf": (found[0] / VOCAB).read_bytes(), "README.md": "# a vocabulary\n"}


@needs_llama
@pytest.mark.transports("xet", "http")
def test_llama_cpp_is_served_past_faults_recorded_and_pinned(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = vocab_gguf()
    old = local_hub.add_repo("org/vocab-GGUF", gguf)
    pytester.makepyfile(test_llama=LLAMA_SUITE)
    pins = pytester.path / "pins.json"
    run(pytester, local_hub, f"--hf-pins={pins}", "--hf-update-pins").assert_outcomes(passed=1)
    recorded = {entry["repo_id"]: entry for entry in json.loads(pins.read_text())}
    assert recorded["org/vocab-GGUF"]["commit"] == old
    assert recorded["org/vocab-GGUF"]["files"] == ["vocab-Q8_0.gguf"]
    local_hub.add_repo("org/vocab-GGUF", {**gguf, "README.md": "# moved on\n"})
    assert local_hub.cache_dir is not None
    cold = local_hub.cache_dir.parent / "cold"
    monkeypatch.setenv("HF_HUB_CACHE", str(cold))  # llama.cpp's cache (it reads no option of the plugin's)
    weights = "*/org/vocab-GGUF/resolve/*/vocab-Q8_0.gguf"
    local_hub.fail(weights, 503, times=2)
    local_hub.cut(weights, 4096)
    local_hub.reset_counters()

    result = pytester.runpytest_subprocess(
        f"--hf-cache-dir={cold}", "--hf-implicit=manage", f"--hf-pins={pins}", "-p", "no:cacheprovider", timeout=TIMEOUT
    )

    result.assert_outcomes(passed=1)
    assert local_hub.pending_faults() == []
    assert [path for _, path, _ in local_hub.requests if "main" in path.split("?")[0].split("/")] == []
    assert [path for _, path, _ in local_hub.requests if path.endswith("/refs")] == []


@needs_llama
def test_llama_cpp_offline_is_served_from_the_cache(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_hub.add_repo("org/vocab-GGUF", vocab_gguf())
    pytester.makepyfile(test_llama=LLAMA_SUITE)
    pins = pytester.path / "pins.json"
    run(pytester, local_hub, f"--hf-pins={pins}", "--hf-update-pins").assert_outcomes(passed=1)
    cold = prefetched(pytester, local_hub, pins)
    monkeypatch.setenv("HF_HUB_CACHE", str(cold))  # llama.cpp's cache

    offline = run_offline(pytester, cold, pins)

    offline.assert_outcomes(passed=1)
    assert local_hub.requests == []
    assert implicit_rows(offline.stdout.str())["org/vocab-GGUF@main"].endswith("(first: test_llama.py::test_llama)")


# --- llama.cpp's requests, spelled with urllib: what runs where llama.cpp is not installed --------------

LIKE_LLAMA = """
import json, os, urllib.request

def get(path, method="GET"):
    request = urllib.request.Request(os.environ["HF_ENDPOINT"] + path, method=method)
    with urllib.request.urlopen(request) as answer:
        return answer.read()

def test_like_llama():
    refs = json.loads(get("/api/models/org/like-GGUF/refs"))
    commit = next(branch["targetCommit"] for branch in refs["branches"] if branch["name"] == "main")
    tree = json.loads(get(f"/api/models/org/like-GGUF/tree/{commit}?recursive=true"))
    assert [entry["path"] for entry in tree] == ["README.md", "model-Q8_0.gguf"]
    get(f"/org/like-GGUF/resolve/{commit}/model-Q8_0.gguf", "HEAD")  # its size, then the bytes
    print("LOADED", commit, get(f"/org/like-GGUF/resolve/{commit}/model-Q8_0.gguf").decode())
"""
LIKE_FILES = {"model-Q8_0.gguf": "GGUF weights", "README.md": "# a model\n"}


def test_a_repos_refs_are_the_pinned_ones_online_and_offline_and_ask_the_hub_nothing(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = local_hub.add_repo("org/like-GGUF", LIKE_FILES)
    pytester.makepyfile(test_like=LIKE_LLAMA)
    pins = pytester.path / "pins.json"
    recorded = run(pytester, local_hub, "-s", f"--hf-pins={pins}", "--hf-update-pins")
    recorded.stdout.fnmatch_lines([f"*LOADED {old} GGUF weights*"])
    # The HEAD's load fetched the file, the GET's read it: 12 bytes fetched, not 24.
    assert " 1 file 12 B fetched " in implicit_rows(recorded.stdout.str())["org/like-GGUF@main"]
    assert json.loads(pins.read_text())[0]["files"] == ["model-Q8_0.gguf"]
    local_hub.add_repo("org/like-GGUF", {**LIKE_FILES, "model-Q8_0.gguf": "moved on"})
    local_hub.reset_counters()

    managed = run(pytester, local_hub, "-s", "--hf-implicit=manage", f"--hf-pins={pins}")

    managed.stdout.fnmatch_lines([f"*LOADED {old} GGUF weights*"])
    assert [path for _, path, _ in local_hub.requests if path.endswith("/refs") or "/main" in path] == []
    cold = prefetched(pytester, local_hub, pins)
    monkeypatch.setenv("HF_HUB_CACHE", str(cold))

    offline = run_offline(pytester, cold, pins, "-s")

    offline.stdout.fnmatch_lines([f"*LOADED {old} GGUF weights*"])
    assert local_hub.requests == []
    assert implicit_rows(offline.stdout.str())["org/like-GGUF@main"].endswith("(first: test_like.py::test_like_llama)")
