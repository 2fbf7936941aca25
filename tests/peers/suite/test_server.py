"""vLLM's way with a server: a child process loads the model by repo id (``vllm serve <id>``)."""

import subprocess
import sys

SERVER = """
import sys
from huggingface_hub import hf_hub_download
from safetensors.numpy import load_file
from transformers import AutoConfig, AutoTokenizer

model = sys.argv[1]
config = AutoConfig.from_pretrained(model)
tokenizer = AutoTokenizer.from_pretrained(model)
weights = load_file(hf_hub_download(model, "model.safetensors"))
print(config.model_type, len(tokenizer), weights["embeddings.weight"].shape[0])
"""


def test_server_loads_the_model():
    served = subprocess.run(
        [sys.executable, "-c", SERVER, "peers/tiny-server"], capture_output=True, text=True, timeout=120
    )
    assert served.returncode == 0, served.stderr
    assert served.stdout.split() == ["bert", "12", "8"]
