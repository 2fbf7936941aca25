"""PEFT's way: every load wrapped in ``hub_online_once``."""

import numpy as np
import pytest
from safetensors.numpy import load_file
from testing_utils import hub_online_once
from transformers import AutoConfig, AutoTokenizer
from transformers.utils import cached_file

MODEL_ID = "peers/tiny-peft"


@pytest.mark.parametrize("text", ["hello world", "the model", "a test"])
def test_tokenizer_round_trip(text):
    with hub_online_once(MODEL_ID):
        config = AutoConfig.from_pretrained(MODEL_ID)
        tokenizer = AutoTokenizer.from_pretrained(MODEL_ID)
        weights = load_file(cached_file(MODEL_ID, "model.safetensors"))
    assert config.vocab_size == len(tokenizer)
    assert tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True) == text
    expected = np.arange(128 * 2048, dtype=np.float32).reshape(128, 2048) / 11.0
    assert np.array_equal(weights["embeddings.weight"], expected)
