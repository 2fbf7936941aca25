"""The repos the vendored tests name, under their real ids, with the content those tests assert.

Tiny stand-ins, built here at run time: tokenizer files whose tokens and ids are the ones the
tests compare against (the rest of each vocabulary is filler), dataset cards whose configs and
splits are the ones the tests list, weights of a few KiB. Each library's repos are added to the
local Hub by ``fill(hub, library)``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq
from tokenizers import Tokenizer, decoders
from tokenizers.models import BPE, Unigram, WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer, ByteLevel, Metaspace
from tokenizers.processors import TemplateProcessing

from pytest_hfsnapshot.testing.hub import LocalHub

Files = dict[str, bytes | str]
#: (repo_id, repo_type, branch, files): one commit of one repo.
Commit = tuple[str, str, str, Files]


# --- tokenizer files --------------------------------------------------------------------------------


def byte_alphabet() -> list[str]:
    """The 256 characters of GPT-2's byte-level alphabet."""

    return sorted(ByteLevel.alphabet())


def bpe_vocab_and_merges(
    tokens: Mapping[str, int], alphabet: list[str], free_from: int
) -> tuple[dict[str, int], list[str]]:
    """A BPE vocabulary holding ``tokens`` at their ids, with merges that build each from its characters.

    Each token is built left to right (``a b``, ``ab c``, ...); the characters and the partial
    tokens take ids from ``free_from`` on. The result is checked by encoding every token.
    """

    vocab = dict(tokens)
    merges: list[str] = []
    next_id = free_from

    def add(token: str) -> None:
        nonlocal next_id
        if token not in vocab:
            vocab[token] = next_id
            next_id += 1

    for char in alphabet:
        add(char)
    for token in tokens:
        if token.startswith("<") and token.endswith(">"):
            continue  # special tokens are matched whole, never merged
        built = token[0]
        for char in token[1:]:
            rule = f"{built} {char}"
            if rule not in merges:
                merges.append(rule)
            built += char
            add(built)
    model = Tokenizer(BPE(vocab, [tuple(rule.split(" ")) for rule in merges]))
    for token in tokens:
        if not (token.startswith("<") and token.endswith(">")):
            got = model.encode(token, add_special_tokens=False).tokens
            if got != [token]:
                raise ValueError(f"the merges build {got} for {token!r}, not the token: reorder the tokens")
    return vocab, merges


def merges_txt(merges: list[str]) -> str:
    return "#version: 0.2\n" + "".join(f"{rule}\n" for rule in merges)


def wordpiece_vocab_txt(tokens: Mapping[str, int]) -> str:
    """A ``vocab.txt`` (one token a line, the line number its id) with ``tokens`` at their ids."""
    size = max(tokens.values()) + 1
    lines = [f"[unused{i}]" for i in range(size)]
    for token, token_id in tokens.items():
        lines[token_id] = token
    return "".join(f"{line}\n" for line in lines)


def wordpiece_tokenizer_json(words: list[str], lowercase: bool) -> str:
    """A BERT tokenizer (``tokenizer.json``) whose vocabulary is the special tokens and ``words``."""

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {token: i for i, token in enumerate([*specials, *words])}
    tokenizer = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = BertNormalizer(lowercase=lowercase)
    tokenizer.pre_tokenizer = BertPreTokenizer()
    tokenizer.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return tokenizer.to_str()


def byte_level_tokenizer_json(words: list[str]) -> str:
    """A GPT-2 style tokenizer (``tokenizer.json``): byte-level BPE whose merges build ``words``."""

    vocab, merges = bpe_vocab_and_merges(
        {"<|endoftext|>": 0, **{w: i + 1 for i, w in enumerate(words)}}, byte_alphabet(), len(words) + 1
    )
    tokenizer = Tokenizer(BPE(vocab, [tuple(rule.split(" ")) for rule in merges]))
    tokenizer.pre_tokenizer = ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer.to_str()


def unigram_tokenizer_json(pieces: list[str]) -> str:
    """A T5 style tokenizer (``tokenizer.json``): Metaspace and a Unigram model of exactly ``pieces``."""

    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), *[(piece, -1.0) for piece in pieces]]
    tokenizer = Tokenizer(Unigram(vocab, unk_id=2))
    tokenizer.pre_tokenizer = Metaspace(replacement="▁", prepend_scheme="always")
    return tokenizer.to_str()


# --- dataset cards ----------------------------------------------------------------------------------


def parquet(rows: int = 2) -> bytes:
    """A small Parquet file of one string column."""

    out = io.BytesIO()
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(rows)]}), out)
    return out.getvalue()


def dataset_card(configs: Mapping[str, list[str]]) -> str:
    """A dataset card whose YAML lists ``configs`` (name -> splits, in order), their data files and ``dataset_info``."""
    lines = ["---", "configs:"]
    for name, splits in configs.items():
        lines += [f"- config_name: {name}", "  data_files:"]
        for split in splits:
            lines += [f"  - split: {split}", f"    path: {name}/{split}-*"]
    lines.append("dataset_info:")
    for name, splits in configs.items():
        lines += [f"- config_name: {name}", "  features:", "  - name: text", "    dtype: string", "  splits:"]
        for split in splits:
            lines += [f"  - name: {split}", "    num_bytes: 12", "    num_examples: 2"]
    return "\n".join([*lines, "---", "", "A stand-in dataset card.", ""])


def dataset_files(configs: Mapping[str, list[str]]) -> Files:
    """The card of ``configs`` and one Parquet file for each of their splits."""
    files: Files = {"README.md": dataset_card(configs)}
    for name, splits in configs.items():
        for split in splits:
            files[f"{name}/{split}-00000-of-00001.parquet"] = parquet()
    return files


# --- the repos of each library ------------------------------------------------------------------------


def huggingface_hub_repos() -> list[Commit]:
    """testing_constants.py's DUMMY_MODEL_ID (with a pull request), the renamed repo and the Xet one."""
    config = json.dumps({"architectures": ["BertForMaskedLM"], "model_type": "bert", "vocab_size": 30522}, indent=2)
    dummy = {
        "config.json": config,
        "README.md": "---\nlicense: mit\n---\n# dummy-unknown\n",
        "merges.txt": "#version: 0.2\nĠ t\n",
        "pytorch_model.bin": bytes(range(256)) * 256,
    }
    return [
        ("julien-c/dummy-unknown", "model", "main", dummy),
        ("julien-c/dummy-unknown", "model", "refs/pr/1", {**dummy, "config.json": config.replace("30522", "30523")}),
        ("hf-internal-testing/dummy-will-be-renamed", "model", "main", {"config.json": config}),
        ("celinah/dummy-xet-testing", "model", "main", {"dummy.safetensors": b"\x07" * 70_000, "README.md": "xet\n"}),
    ]


def tokenizers_repos() -> list[Commit]:
    """The data tokenizers' utils.py downloads (hf-internal-testing/tokenizers-test-data), and the ids they load."""
    bert_ids = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}
    bert_ids |= {"is": 2003, "my": 2026, "name": 2171, "john": 2198, "pair": 3940, "georges": 3941}
    roberta_ids = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "Ġthe": 5, "ĠThe": 20, "Ġover": 81, "The": 133}
    roberta_ids |= {"Ġquick": 2119, "Ġdog": 2335, "Ġbrown": 6219, "Ġjumps": 13855, "Ġlazy": 22414, "Ġfox": 23602}
    roberta_ids |= {"ĠMy": 30000, "Ġname": 30001, "Ġis": 30002, "ĠJohn": 30003}
    vocab, merges = bpe_vocab_and_merges(roberta_ids, byte_alphabet(), 50000)
    words = ["Hey", "there", "dear", "friend", "!"]
    return [
        (
            "hf-internal-testing/tokenizers-test-data",
            "dataset",
            "main",
            {
                "bert-base-uncased-vocab.txt": wordpiece_vocab_txt(bert_ids),
                "roberta-base-vocab.json": json.dumps(vocab),
                "roberta-base-merges.txt": merges_txt(merges),
            },
        ),
        ("bert-base-cased", "model", "main", {"tokenizer.json": wordpiece_tokenizer_json(words, lowercase=False)}),
        (
            "anthony/tokenizers-test",
            "model",
            "main",
            {"tokenizer.json": wordpiece_tokenizer_json([w.lower() for w in words], lowercase=True)},
        ),
        (
            "anthony/tokenizers-test",
            "model",
            "gpt-2",
            {"tokenizer.json": byte_level_tokenizer_json(["Hey", "Ġthere", "Ġdear", "Ġfriend", "!"])},
        ),
        (
            "t5-base",
            "model",
            "main",
            {
                "tokenizer.json": unigram_tokenizer_json(
                    ["▁Hey", "▁there", "▁dear", "▁friend", "!", "<", "end", "_", "of", "text", ">"]
                )
            },
        ),
        (
            "hf-internal-testing/gpt-oss-20b",
            "model",
            "main",
            {"tokenizer.json": byte_level_tokenizer_json(["my", "Ġname", "Ġis", "Ġjohn", "Ġpair"])},
        ),
    ]


def datasets_repos() -> list[Commit]:
    """The dataset ids test_inspect.py names, with the configs and splits it lists."""
    org = "hf-internal-testing"
    audio = {
        "data/train/a.wav": b"RIFF\x24\x00\x00\x00WAVEfmt ",
        "data/train/metadata.csv": "file_name,text\na.wav,a\n",
    }
    return [
        ("rajpurkar/squad", "dataset", "main", dataset_files({"plain_text": ["train", "validation"]})),
        ("dalle-mini/wit", "dataset", "main", dataset_files({"default": ["train"]})),
        (
            "google-research-datasets/paws",
            "dataset",
            "main",
            dataset_files(
                {
                    "labeled_final": ["train", "test", "validation"],
                    "labeled_swap": ["train"],
                    "unlabeled_final": ["train", "validation"],
                }
            ),
        ),
        ("amirveyseh/acronym_identification", "dataset", "main", dataset_files({"default": ["train", "test"]})),
        (f"{org}/librispeech_asr_dummy", "dataset", "main", dataset_files({"clean": ["validation"]})),
        (f"{org}/audiofolder_no_configs_in_metadata", "dataset", "main", {"README.md": "# audio\n", **audio}),
        (
            f"{org}/audiofolder_single_config_in_metadata",
            "dataset",
            "main",
            {"README.md": "---\nconfigs:\n- config_name: custom\n  data_dir: data\n---\n", **audio},
        ),
        (
            f"{org}/audiofolder_two_configs_in_metadata",
            "dataset",
            "main",
            {
                "README.md": "---\nconfigs:\n"
                + "".join(f"- config_name: {name}\n  data_dir: data\n" for name in ("v1", "v2"))
                + "---\n",
                **audio,
            },
        ),
        (f"{org}/gated_dataset_with_data_files", "dataset", "main", dataset_files({"default": ["train"]})),
        (f"{org}/private_dataset_with_data_files", "dataset", "main", dataset_files({"default": ["train"]})),
    ]


GATED = {"hf-internal-testing/gated_dataset_with_data_files"}
PRIVATE = {"hf-internal-testing/private_dataset_with_data_files"}
REPOS: dict[str, Callable[[], list[Commit]]] = {
    "huggingface_hub": huggingface_hub_repos,
    "tokenizers": tokenizers_repos,
    "datasets": datasets_repos,
}


def fill(hub: LocalHub, library: str) -> list[Commit]:
    """Add ``library``'s repos to ``hub``; returns what was added."""
    commits = REPOS[library]()
    for repo_id, repo_type, branch, files in commits:
        hub.add_repo(
            repo_id, files, repo_type=repo_type, branch=branch, gated=repo_id in GATED, private=repo_id in PRIVATE
        )
    return commits
