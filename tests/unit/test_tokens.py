"""The bundled MiniLM tokenizer and count_tokens."""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor

import pytest
from rag_ingest.core.tokens import MODEL_MAX_SEQUENCE_TOKENS, TOKENIZER_PATH, count_tokens, load_tokenizer

pytestmark = pytest.mark.unit

# The upstream file, unmodified (see resources/README.md).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def test_bundled_tokenizer_is_the_documented_file() -> None:
    assert hashlib.sha256(TOKENIZER_PATH.read_bytes()).hexdigest() == TOKENIZER_SHA256
    readme = (TOKENIZER_PATH.parent / "README.md").read_text(encoding="utf-8")
    assert TOKENIZER_SHA256 in readme
    assert "Apache License 2.0" in readme
    assert (TOKENIZER_PATH.parent / "LICENSE-Apache-2.0.txt").is_file()


def test_count_excludes_special_tokens() -> None:
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0


def test_wordpiece_splits_rare_words_and_punctuation() -> None:
    # "lighthouses" is not one vocabulary entry; the comma and period are tokens of their own.
    assert count_tokens("lighthouses, keepers.") > 3


def test_long_text_is_not_truncated_to_128() -> None:
    # The shipped tokenizer.json truncates and pads at 128: counting must see every token.
    assert count_tokens("word " * 1000) == 1000
    assert count_tokens("word " * 1000) > MODEL_MAX_SEQUENCE_TOKENS


def test_short_text_is_not_padded() -> None:
    encoding = load_tokenizer().encode("hello world")
    assert encoding.tokens == ["[CLS]", "hello", "world", "[SEP]"]
    assert encoding.attention_mask == [1, 1, 1, 1]


def test_load_tokenizer_has_no_truncation_or_padding() -> None:
    tokenizer = load_tokenizer()
    assert tokenizer.truncation is None
    assert tokenizer.padding is None


def test_lowercases_like_the_uncased_model() -> None:
    assert load_tokenizer().encode("Hello WORLD", add_special_tokens=False).tokens == ["hello", "world"]


def test_count_is_additive_over_whitespace_separated_parts() -> None:
    # The chunker relies on this: BERT pre-tokenizes on whitespace before WordPiece.
    parts = ["The Pharos of Alexandria changed the scale of the idea.", "Rain could drown it!"]
    assert count_tokens(" ".join(parts)) == sum(count_tokens(part) for part in parts)


def test_count_tokens_is_safe_across_threads() -> None:
    texts = [f"sentence number {index} " * (index % 7 + 1) for index in range(200)]
    expected = [count_tokens(text) for text in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(count_tokens, texts)) == expected
