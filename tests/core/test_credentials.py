"""The one token lookup (kept light for the plugin's start-up, used by prefetch too) agrees with get_token."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import constants, get_token

from pytest_hfsnapshot.core.hub import credentials


@pytest.mark.parametrize(
    ("env", "file_text"),
    [
        ({}, None),
        ({"HF_TOKEN": "hf_fromenv"}, None),
        ({"HF_TOKEN": "  hf_padded \n"}, None),
        ({"HUGGING_FACE_HUB_TOKEN": "hf_legacy"}, None),
        ({"HF_TOKEN": "", "HUGGING_FACE_HUB_TOKEN": "hf_legacy"}, None),
        ({}, "hf_fromfile\n"),
        ({}, "   \n"),
        ({"HF_TOKEN": "hf_env_wins"}, "hf_fromfile\n"),
        ({"HF_TOKEN": "   "}, "hf_fromfile\n"),
    ],
)
def test_token_lookup_agrees_with_huggingface_hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], file_text: str | None
) -> None:
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    token_file = tmp_path / "token"
    if file_text is not None:
        token_file.write_text(file_text)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(token_file))

    assert credentials.hub_token() == get_token()
    assert credentials.token_set() is (get_token() is not None)
