"""PEFT's tests/testing_utils.py: ``hub_online_once`` switches a process offline after an id's first load."""

import os
from contextlib import contextmanager
from unittest import mock

_HUB_MODEL_ACCESSES = {}


@contextmanager
def hub_online_once(model_id: str):
    # PEFT's helper as it is (transformers >= 5 branch): the first use of an id patches
    # huggingface_hub online, every later use offline.
    override = {}
    try:
        if model_id in _HUB_MODEL_ACCESSES:
            override = {"HF_HUB_OFFLINE": "1"}
            _HUB_MODEL_ACCESSES[model_id] += 1
        else:
            _HUB_MODEL_ACCESSES[model_id] = 0
        is_offline = override.get("HF_HUB_OFFLINE", False) == "1"
        with (
            mock.patch.dict(os.environ, override),
            mock.patch("huggingface_hub.constants.HF_HUB_OFFLINE", is_offline),
            mock.patch("transformers.utils.hub.is_offline_mode", lambda: is_offline),
        ):
            yield
    except Exception:
        if _HUB_MODEL_ACCESSES.get(model_id) == 0:
            del _HUB_MODEL_ACCESSES[model_id]
        raise
