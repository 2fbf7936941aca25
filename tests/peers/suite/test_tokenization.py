"""transformers' way: ids inline in test bodies and in a unittest class's setUpClass."""

import unittest

from transformers import AutoConfig, AutoTokenizer


class TinyWordTokenizationTest(unittest.TestCase):
    from_pretrained_id = "peers/tiny-word"

    @classmethod
    def setUpClass(cls):
        cls.tokenizer = AutoTokenizer.from_pretrained(cls.from_pretrained_id)

    def test_lowercases(self):
        self.assertEqual(self.tokenizer("HELLO the")["input_ids"], [5, 7])

    def test_unknown_word(self):
        self.assertEqual(self.tokenizer("zebra")["input_ids"], [1])


def test_canonical_id_without_org():
    # Like "bert-base-uncased": a canonical repo id with no organization.
    config = AutoConfig.from_pretrained("tiny-bare")
    assert config.model_type == "bert"
