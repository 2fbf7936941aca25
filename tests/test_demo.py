"""The demo, the examples users copy, and the options the README documents: all run, as shipped."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import file_fetches

from pytest_hfsnapshot.testing.hub import LocalHub

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def clean_env() -> dict[str, str]:
    """The environment minus anything that would point huggingface_hub or pytest elsewhere."""
    env = dict(os.environ)
    for name in list(env):
        if name.startswith(("HF_", "HUGGING", "PYTEST_")) or name == "HFSNAPSHOT_LOCK_MODE":
            del env[name]
    return env


@pytest.fixture(scope="module")
def demo() -> subprocess.CompletedProcess[str]:
    pytest.importorskip("xdist")
    return subprocess.run(
        [sys.executable, "-m", "pytest_hfsnapshot.demo"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_demo_exits_with_pytests_code(demo: subprocess.CompletedProcess[str]) -> None:
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "5 passed, 2 skipped" in demo.stdout
    assert demo.stdout.rstrip().endswith("pytest exited with 0.")


def test_demo_shows_the_header_line(demo: subprocess.CompletedProcess[str]) -> None:
    assert re.search(
        r"^hfsnapshot: cache=\S+/hf-cache endpoint=http://127\.0\.0\.1:\d+ offline=False token=unset$",
        demo.stdout,
        re.MULTILINE,
    ), demo.stdout


def test_demo_shows_one_summary_row_per_snapshot(demo: subprocess.CompletedProcess[str]) -> None:
    summary = demo.stdout.split("= hf snapshots =", 1)[1].split("short test summary", 1)[0]
    rows = [line for line in summary.splitlines() if line.startswith("demo/")]
    assert len(rows) == 3, summary
    assert re.match(
        r"demo/cached-model@main +[0-9a-f]{12}  3 files  .*  repair  .* repair by gw\d; repaired 1 file", rows[0]
    )
    assert "    repaired: model.safetensors" in summary
    assert re.match(r"demo/large-model@main \[metadata only\] +[0-9a-f]{12}  2 files  .*  download  ", rows[1])
    assert re.match(r"demo/tiny-model@main +[0-9a-f]{12}  3 files  .*  download  .* download by gw\d", rows[2])
    assert "Hub access refused: 1 test (1 skipped)" in summary


def test_demo_skips_the_gated_repo_with_the_reason(demo: subprocess.CompletedProcess[str]) -> None:
    assert re.search(
        r"SKIPPED \[1\] \S+test_models\.py:\d+: demo/gated-model@main is gated and no Hub token is set: "
        r"accept the conditions at http://127\.0\.0\.1:\d+/demo/gated-model and set HF_TOKEN",
        demo.stdout,
    ), demo.stdout
    assert "needs a Hugging Face Hub token" in demo.stdout


def test_demo_explains_the_run_with_the_hubs_counts(demo: subprocess.CompletedProcess[str]) -> None:
    explained = demo.stdout.split("What you just saw:", 1)[1]
    assert re.search(
        r"crossed the network once, (through Xet|over HTTP).*: 1 fetch of model.safetensors in all", explained
    )
    assert 'fetched again (1 fetch): source "repair"' in explained
    assert "0 B of its 8.0 MiB weight file served" in explained
    assert re.search(r"403 GatedRepo \(\d+ refused requests?, none asked twice\)", explained)
    assert re.search(r"The local Hub served \d+ requests", explained)


def hub_repos(hub: LocalHub) -> None:
    """The repos examples/conftest_patterns asks for, as small stand-ins on the local Hub."""

    def weights(seed: int) -> dict[str, bytes]:
        # Distinct per repo: with the shared blob store, equal bytes in two repos are fetched once.
        return {"model.safetensors": bytes([seed]) * 2048, "pytorch_model.bin": bytes([seed + 1]) * 2048}

    hub.add_repo(
        "hf-internal-testing/tiny-random-bert",
        {"config.json": '{"model_type": "bert"}', "tokenizer_config.json": "{}", "vocab.txt": "[PAD]\n", **weights(1)},
    )
    hub.add_repo(
        "hf-internal-testing/tiny-random-gpt2",
        {"config.json": '{"model_type": "gpt2"}', "vocab.json": "{}", "merges.txt": "#\n", **weights(3)},
    )
    hub.add_repo("hf-internal-testing/tiny-random-LlamaForCausalLM", {"config.json": "{}", **weights(5)})
    hub.add_repo(
        "stanfordnlp/imdb",
        {"README.md": "# IMDB\n", "plain_text/train-00000-of-00001.parquet": b"PAR1" * 512},
        repo_type="dataset",
    )
    hub.add_repo("meta-llama/Llama-3.2-1B", {"config.json": "{}", **weights(7)}, gated=True)


def test_conftest_patterns_example(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    hub_repos(local_hub)
    pytester.makeconftest((EXAMPLES / "conftest_patterns" / "conftest.py").read_text())
    pytester.makepyfile(test_example=(EXAMPLES / "conftest_patterns" / "test_example.py").read_text())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", *xdist_args())
    with_transformers = importlib.util.find_spec("transformers") is not None
    result.assert_outcomes(passed=10 + with_transformers, skipped=2 - with_transformers)
    result.stdout.fnmatch_lines(["*needs a Hugging Face Hub token*"])
    assert local_hub.served("*/tiny-random-LlamaForCausalLM/resolve/*/model.safetensors") == 0
    assert file_fetches(local_hub, "*/tiny-random-bert/resolve/*/model.safetensors") == 1
    assert local_hub.request_count("/meta-llama/*") == 0


def test_own_loader_example(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_own_loader=(EXAMPLES / "test_own_loader.py").read_text())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)


def xdist_args() -> tuple[str, ...]:
    return ("-n", "2") if importlib.util.find_spec("xdist") is not None else ()


def test_github_actions_example_is_valid_yaml() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    steps = workflow["jobs"]["test"]["steps"]
    runs = [step.get("run", "") for step in steps]
    prefetch_line = "python -m pytest --hf-prefetch-only --hf-manifest=hf-manifest.json --hf-pins=hf-pins.json"
    assert prefetch_line in runs
    assert "python -m pytest -n auto --hf-offline --hf-pins=hf-pins.json" in runs
    prefetch = runs.index(prefetch_line)
    assert steps[prefetch]["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
    save = next(step for step in steps if step.get("uses", "").startswith("actions/cache/save"))
    assert steps.index(save) > prefetch
    assert save["with"]["key"] == "hf-${{ runner.os }}-${{ hashFiles('hf-pins.json', 'hf-manifest.json') }}"
