"""Heading lines found in plain text: a PDF's pages and a text file, which state none.

:func:`detect_headings` finds a short line (at most ``HEADING_MAX_WORDS`` words) with no final
period, comma, colon or semicolon, followed by text, that is either numbered (``2``, ``1.2``,
``A.3``, ``Appendix B``: the depth of the number is the level) or reads as a heading (title case,
or a one-line "paragraph" between a finished sentence and a capitalised line). Dot leaders and a
trailing page number mark a table-of-contents line, never a heading. Unnumbered headings nest one
level below the nearest numbered one. The structured formats state their headings as blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADING_MAX_WORDS = 12
HEADING_MAX_CHARS = 90

# "1", "1.2", "A.3", "Appendix B" (at most 4 levels of at most 2 digits: not "2022 was ...").
_HEADING_NUMBER = re.compile(
    r"(?:(?:Appendix|Chapter|Part|Section)\s+(?:[A-Z]|\d{1,2})\b[.:]?"
    r"|(?:\d{1,2}(?:\.\d{1,2}){0,3}|[A-Z](?:\.\d{1,2}){1,3})(?=[.\s])\.?)\s+"
)
_NAMED_NUMBER = re.compile(r"^(?:Appendix|Chapter|Part|Section)\b")
_TOC_LINE = re.compile(r"(?:\.\s?){3,}|\s\d+$|\s[ivxlc]+$")
_CODE_CHARACTERS = frozenset("\\{}=<>$[]_#@%|~^*")
# A line ending in one of these is a wrapped sentence, not a heading.
_TRAILING_FUNCTION_WORDS = frozenset(
    {"a", "an", "and", "as", "at", "by", "for", "from", "in", "is", "are", "of", "on", "or", "the", "to"}
    | {"that", "which", "while", "with", "when", "where", "be", "can", "will", "this", "these", "we", "it"}
)
_HEADING_STOPWORDS = frozenset(
    {"a", "an", "and", "as", "at", "by", "for", "from", "in", "into", "of", "on", "or", "over", "the", "to"}
    | {"under", "via", "vs", "with", "without"}
)


@dataclass(frozen=True)
class Heading:
    """A heading line of the document text: ``text[start:end]``, its level (1 = outermost) and title."""

    start: int
    end: int
    level: int
    title: str
    numbered: bool
    anchor: str | None = None  # a structured format's heading: its id in the rendered view


def detect_headings(text: str) -> list[Heading]:
    """Heading lines of ``text`` (see the module docstring), in order, with their levels.

    Numbered headings must continue the numbering of the previous one (``1.2`` → ``1.3``, ``1.3.1``
    or ``2``; small gaps allowed for headings missed), which keeps footnotes (``1 In some cases``)
    and numbered list items out.
    """
    lines = [_stripped(match) for match in re.finditer(r"[^\n]+", text)]
    lines = [(start, end) for start, end in lines if end > start]
    headings: list[Heading] = []
    last_number: tuple[int, ...] | None = None
    index = 0
    while index < len(lines):
        start, end = lines[index]
        previous = text[slice(*lines[index - 1])] if index else None
        following = [text[slice(*span)] for span in lines[index + 1 : index + 3]]
        found = _heading_at(text[start:end], previous, following)
        if found is None:
            index += 1
            continue
        number, continued = found
        if number is None:
            level = len(last_number) + 1 if last_number else 1
        else:
            parts = _number_parts(number)
            if parts is not None and not _continues_numbering(last_number, parts):
                index += 1
                continue
            last_number = parts
            level = _number_depth(number)
        if continued:
            end = lines[index + 1][1]
        headings.append(Heading(start, end, level, " ".join(text[start:end].split()), numbered=number is not None))
        index += 2 if continued else 1
    return headings


def _heading_at(line: str, previous: str | None, following: list[str]) -> tuple[str | None, bool] | None:
    """(its number or None, whether the next line continues it), or None when not a heading."""
    if not following or len(line) > HEADING_MAX_CHARS or _TOC_LINE.search(line):
        return None
    if line[-1] in ".,;:-" or any(character in _CODE_CHARACTERS for character in line):
        return None
    number = _HEADING_NUMBER.match(line)
    title = line[number.end() :] if number else line
    words = title.split()
    if not words or len(words) > HEADING_MAX_WORDS or not title[0].isupper() or not any(c.isalpha() for c in title):
        return None
    next_line = following[0]
    if number:
        if number.group().rstrip().endswith(".") and not _is_title_case(words):
            return None  # "2. Start the program with": a numbered list item, not "2. Installation"
        # A heading wrapped onto a second short line ("3.1 More data fields supported by the bst" / "files").
        continued = (
            len(next_line.split()) <= 4
            and next_line[0].islower()
            and next_line[-1] not in ".,;:"
            and len(following) > 1
            and following[1][:1].isupper()
        )
        return number.group().strip(), continued
    if not (next_line[:1].isupper() or next_line[:1].isdigit()):
        return None
    if words[-1].lower() in _TRAILING_FUNCTION_WORDS or sum(any(c.isdigit() for c in word) for word in words) > 1:
        return None  # "... Swedish, and", "Version 4.2 (2022-11-10)": a wrapped line or a date line
    if _is_title_case(words):
        return None, False
    # A one-line "paragraph" between a finished sentence and a capitalised line.
    ends_sentence = previous is None or previous[-1] in ".!?:"
    if ends_sentence and len(words) <= 8 and "," not in title:
        return None, False
    return None


def _number_depth(number: str) -> int:
    """1 for "3", "3." and "Appendix B"; 2 for "3.1"; at most 4."""
    if _NAMED_NUMBER.match(number):
        return 1
    return min(4, number.rstrip(".").count(".") + 1)


def _number_parts(number: str) -> tuple[int, ...] | None:
    """(1, 2) for "1.2"; None for "Appendix B" or "A.1", whose sequence is not checked."""
    parts = number.rstrip(".").split(".")
    return tuple(int(part) for part in parts) if all(part.isdigit() for part in parts) else None


def _continues_numbering(previous: tuple[int, ...] | None, current: tuple[int, ...]) -> bool:
    if previous is None:
        return all(part <= 2 for part in current)
    depth = len(current)
    if depth == len(previous) + 1:
        return current[:-1] == previous and current[-1] <= 2
    if depth <= len(previous):
        return current[:-1] == previous[: depth - 1] and 1 <= current[-1] - previous[depth - 1] <= 3
    return False


def _is_title_case(words: list[str]) -> bool:
    significant = [word for word in words if word.lower() not in _HEADING_STOPWORDS]
    return bool(significant) and all(word[0].isupper() or not word[0].isalpha() for word in significant)


def _stripped(line: re.Match[str]) -> tuple[int, int]:
    """The span of ``line`` without its leading and trailing whitespace."""
    text = line.group()
    start = line.start() + len(text) - len(text.lstrip())
    return start, max(start, line.start() + len(text.rstrip()))
