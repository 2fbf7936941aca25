"""vLLM's way: a module list of repo ids, parametrized tests, a runner fixture."""

import pytest
from transformers import AutoConfig

MODELS = ["peers/tiny-bert", "peers/tiny-word"]


@pytest.mark.parametrize("model", MODELS)
def test_config(model):
    config = AutoConfig.from_pretrained(model)
    assert config.model_type == "bert"
    assert config.hidden_size == 32


@pytest.mark.parametrize("model", MODELS)
def test_runner_encodes(hf_runner, model):
    runner = hf_runner(model)
    assert runner.weights["embeddings.weight"].shape == (128, 2048)
    ids = runner.encode("Hello world")
    assert [i for i in ids if i > 4] == [5, 6]
