"""Token counting with the all-MiniLM-L6-v2 WordPiece tokenizer.

The chunker sizes chunks with :func:`count_tokens`; the local embedder encodes with
:func:`load_tokenizer`. Both use the bundled ``resources/minilm-tokenizer.json`` with its
shipped truncation and padding (128 tokens) switched off: a truncating counter would report
128 for every long chunk, and the embedder must see the real length to refuse it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from tokenizers import Tokenizer

# The package-data folder, rag_ingest/resources (pyproject.toml ships it with the package).
TOKENIZER_PATH = Path(__file__).parents[1] / "resources" / "minilm-tokenizer.json"
#: Positions the model accepts, including the [CLS] and [SEP] it adds.
MODEL_MAX_SEQUENCE_TOKENS = 512
#: Special tokens the post-processor adds around one text ([CLS] ... [SEP]).
SPECIAL_TOKENS_PER_TEXT = 2


def load_tokenizer() -> Tokenizer:
    """A new tokenizer instance with no truncation and no padding (callers configure their own)."""
    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


@cache
def _counting_tokenizer() -> Tokenizer:
    # One shared instance, never reconfigured after load, so counting is safe from any thread.
    return load_tokenizer()


def count_tokens(text: str) -> int:
    """Number of WordPiece tokens in ``text``, without the [CLS]/[SEP] special tokens."""
    return len(_counting_tokenizer().encode(text, add_special_tokens=False).ids)


@cache
def _whole_word_vocabulary() -> frozenset[str]:
    # WordPiece entries that are whole words (not "##" continuations, not [SPECIAL] tokens).
    vocabulary = _counting_tokenizer().get_vocab()
    return frozenset(entry for entry in vocabulary if entry.isalpha() and not entry.startswith("##"))


def is_vocabulary_word(word: str) -> bool:
    """True when ``word`` (case-insensitive) is a whole word of the tokenizer's 30k-entry vocabulary:
    a cheap English dictionary, used to tell hyphenated compounds from words broken by line wrap."""
    return word.lower() in _whole_word_vocabulary()
