"""Character error rate: edit distance between recognised and true text over the true text's length."""

from __future__ import annotations

import re

_WHITESPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Whitespace runs (line breaks included) become one space: layout is not what OCR is scored on."""
    return _WHITESPACE.sub(" ", text).strip()


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions), by Hyyrö's bit-parallel form of Myers'
    algorithm: one pass over ``b`` with ``len(a)``-bit integers, fast enough for whole pages."""
    if not a:
        return len(b)
    if not b:
        return len(a)
    match_masks: dict[str, int] = {}
    for index, char in enumerate(a):
        match_masks[char] = match_masks.get(char, 0) | (1 << index)
    mask = (1 << len(a)) - 1
    last = 1 << (len(a) - 1)
    positive, negative, score = mask, 0, len(a)
    for char in b:
        equal = match_masks.get(char, 0)
        vertical = equal | negative
        horizontal = (((equal & positive) + positive) ^ positive) | equal
        horizontal_positive = negative | (~(horizontal | positive) & mask)
        horizontal_negative = positive & horizontal
        if horizontal_positive & last:
            score += 1
        elif horizontal_negative & last:
            score -= 1
        horizontal_positive = ((horizontal_positive << 1) | 1) & mask
        horizontal_negative = (horizontal_negative << 1) & mask
        positive = horizontal_negative | (~(vertical | horizontal_positive) & mask)
        negative = horizontal_positive & vertical
    return score


def character_error_rate(recognised: str, truth: str) -> float:
    """Edits needed to turn the recognised text into the truth, per character of the truth."""
    truth, recognised = normalise(truth), normalise(recognised)
    return levenshtein(truth, recognised) / max(len(truth), 1)
