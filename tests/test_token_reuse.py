"""Tokens a sibling recipe already made: copied only where they are exactly what encoding the
document gives, so a recipe's shards are byte for byte those of a lake without the donor."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from tokenmill.data_assets.datasets import recipe_zones

from tests.test_tokenize import (
    SOURCE,
    TEXTS,
    UNIT,
    build_tokenizer,
    deduplicated_part,
    tokenize_unit,
)
from tokenmill.crawl.units import write_batch
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER, TOKENIZED_SHARDS
from tokenmill.tokens import reuse as token_reuse
from tokenmill.tokens.tokenization import TokenizerSettings, train_byte_level_bpe

SHARD = UNIT.part_prefix(TOKENIZED_SHARDS, 0)
# (doc id, text): recipe "a" keeps docs 0-5; recipe "b" drops doc 1, masks doc 3's text, and
# keeps doc 9, which "a" dropped.
A_DOCS = [(f"doc{i:04d}", text) for i, text in enumerate(TEXTS)]
B_DOCS = [
    A_DOCS[0],
    A_DOCS[2],
    ("doc0003", TEXTS[3].replace("Emoji", "[EMAIL]")),
    A_DOCS[4],
    ("doc0009", "A document only recipe b keeps, with its own words."),
    A_DOCS[5],
]


def byte_level(texts=TEXTS) -> Tokenizer:
    return train_byte_level_bpe(iter(list(texts) * 10), 400)


def recipes(root: Lake, tokenizers: dict[str, Tokenizer], docs: dict[str, list]) -> dict:
    """Recipe views of one lake, each with its deduplicated part and its tokenizer."""
    write_batch(root, UNIT.crawl, 0, [[SOURCE]])
    views = {}
    for name, tokenizer in tokenizers.items():
        view = root.with_zones(recipe_zones(name))
        deduplicated_part(view, docs[name])
        root.write_bytes(f"models/{name}.json", tokenizer.to_str().encode())
        build_tokenizer(view, TokenizerSettings(path=root.path(f"models/{name}.json")))
        views[name] = view
    return views


def shard_bytes(lake: Lake) -> dict[str, bytes]:
    return {
        name: lake.read_bytes(f"{SHARD}/{name}")
        for name in ("tokens.bin", "tokens.idx", "provenance.parquet")
    }


def test_a_recipe_copies_the_tokens_of_unchanged_documents_and_writes_the_same_bytes(tmp_path):
    tokenizer = byte_level()
    views = recipes(
        Lake.from_url(str(tmp_path / "lake")),
        {"a": tokenizer, "b": tokenizer},
        {"a": A_DOCS, "b": B_DOCS},
    )
    assert tokenize_unit(views["a"]).counts["documents_reused"] == 0
    report = tokenize_unit(views["b"])
    # docs 0, 2, 4 and 5: same id, same text; doc 3's text differs, doc 9 is not in "a"
    assert report.counts["documents_reused"] == 4
    alone = recipes(Lake.from_url(str(tmp_path / "alone")), {"b": tokenizer}, {"b": B_DOCS})
    assert tokenize_unit(alone["b"]).counts["documents_reused"] == 0
    assert shard_bytes(views["b"]) == shard_bytes(alone["b"])


def test_another_tokenizer_or_end_of_document_setting_gives_no_tokens(tmp_path):
    views = recipes(
        Lake.from_url(str(tmp_path / "lake")),
        {"a": byte_level(TEXTS[:3]), "b": byte_level(), "c": byte_level()},
        {"a": A_DOCS, "b": A_DOCS, "c": A_DOCS},
    )
    tokenize_unit(views["a"])
    assert tokenize_unit(views["b"]).counts["documents_reused"] == 0  # another tokenizer
    from tokenmill.tokens.tokenization import TokenizeSettings

    assert (
        tokenize_unit(views["c"], TokenizeSettings(append_eod=False)).counts["documents_reused"]
        == 0
    )
    assert tokenize_unit(views["c"]).counts["documents_reused"] == len(A_DOCS)  # b's


def test_a_tokenizer_that_does_not_decode_what_it_encodes_is_reused_by_text(tmp_path):
    # Whitespace is lost: the same tokens for two texts, each document matched by its own text
    vocab = {"a": 0, "b": 1, "c": 2, "[UNK]": 3, "<|endoftext|>": 4}
    lossy = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    lossy.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    docs = {
        "a": [("doc0000", "a b"), ("doc0001", "a  b")],
        "b": [("doc0000", "a b"), ("doc0001", "a  b c")],
    }
    views = recipes(Lake.from_url(str(tmp_path / "lake")), {"a": lossy, "b": lossy}, docs)
    tokenize_unit(views["a"])
    assert tokenize_unit(views["b"]).counts["documents_reused"] == 1  # doc0001's text differs
    alone = recipes(Lake.from_url(str(tmp_path / "alone")), {"b": lossy}, {"b": docs["b"]})
    tokenize_unit(alone["b"])
    assert shard_bytes(views["b"]) == shard_bytes(alone["b"])


def test_a_donor_rewritten_during_the_copy_is_not_used(tmp_path, monkeypatch):
    tokenizer = byte_level()
    views = recipes(
        Lake.from_url(str(tmp_path / "lake")),
        {"a": tokenizer, "b": tokenizer},
        {"a": A_DOCS, "b": B_DOCS},
    )
    tokenize_unit(views["a"])
    copy = token_reuse.reused_or_encoded

    def and_the_donor_commits_again(tokenizer, doc_ids, texts, hashes, donor):
        result = copy(tokenizer, doc_ids, texts, hashes, donor)
        if donor is not None:
            marker = views["a"].read_json(f"{SHARD}/{MARKER}")
            views["a"].write_json(f"{SHARD}/{MARKER}", marker | {"rewritten": True})
        return result

    monkeypatch.setattr(
        "tokenmill.tokens.tokenization.reused_or_encoded", and_the_donor_commits_again
    )
    report = tokenize_unit(views["b"])
    assert report.counts["documents_reused"] == 0
    alone = recipes(Lake.from_url(str(tmp_path / "alone")), {"b": tokenizer}, {"b": B_DOCS})
    tokenize_unit(alone["b"])
    assert shard_bytes(views["b"]) == shard_bytes(alone["b"])


@pytest.mark.parametrize("name", ["gpt-neox-style-50k", "llama-style-32k"])
def test_real_tokenizers_are_reused_exactly(tmp_path, shared, name):
    tokenizer = Tokenizer.from_file(str(shared / "tokenizers" / f"{name}.tokenizer.json"))
    views = recipes(
        Lake.from_url(str(tmp_path / "lake")),
        {"a": tokenizer, "b": tokenizer},
        {"a": A_DOCS, "b": B_DOCS},
    )
    tokenize_unit(views["a"])
    reused = tokenize_unit(views["b"]).counts["documents_reused"]
    alone = recipes(Lake.from_url(str(tmp_path / "alone")), {"b": tokenizer}, {"b": B_DOCS})
    tokenize_unit(alone["b"])
    assert shard_bytes(views["b"]) == shard_bytes(alone["b"])
    assert reused == 4
