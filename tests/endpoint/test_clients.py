"""Session processes whose Hub client is not huggingface_hub: Rust ``hf-hub``, as TGI's router uses it.

The router here is outlines-core's ``Vocabulary.from_pretrained``: tokenizers' Rust ``from_pretrained``
fetches ``tokenizer.json`` with ``hf-hub``'s ``ApiBuilder::from_env()``, which reads ``HF_ENDPOINT``.
No Python code of huggingface_hub runs for that file, so only the session endpoint can see it.
"""

from __future__ import annotations

import json

import pytest

from pytest_hfsnapshot.plugin.implicit import offline_miss_line
from pytest_hfsnapshot.testing.hub import LocalHub

from .test_session import TIMEOUT, implicit_rows, run

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
    assert local_hub.cache_dir is not None
    cold = local_hub.cache_dir.parent / "ci-cache"
    prefetch = pytester.runpytest_subprocess(
        f"--hf-cache-dir={cold}", f"--hf-pins={pins}", "--hf-prefetch-only", "-p", "no:cacheprovider", timeout=TIMEOUT
    )
    assert prefetch.ret == 0, prefetch.stdout.str()
    local_hub.reset_counters()

    offline = pytester.runpytest_subprocess(
        f"--hf-cache-dir={cold}", f"--hf-pins={pins}", "--hf-offline", "-p", "no:cacheprovider", "-rfE", timeout=TIMEOUT
    )

    offline.assert_outcomes(passed=1, failed=1)
    assert local_hub.requests == []
    assert offline_miss_line("org/unlisted@main", "tokenizer.json", pins) in offline.stdout.str()
