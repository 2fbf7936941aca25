"""As vLLM's tests/conftest.py hands out its runner: a class that loads a model by repo id."""

import pytest
from safetensors.numpy import load_file
from transformers import AutoConfig, AutoTokenizer
from transformers.utils import cached_file


class HfRunner:
    def __init__(self, model_name: str) -> None:
        self.config = AutoConfig.from_pretrained(model_name)
        self.tokenizer = AutoTokenizer.from_pretrained(model_name)
        # What AutoModel.from_pretrained does for a single-file checkpoint, without torch.
        self.weights = load_file(cached_file(model_name, "model.safetensors"))

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text)["input_ids"]


@pytest.fixture(scope="session")
def hf_runner():
    return HfRunner
