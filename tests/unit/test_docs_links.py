"""README.md and docs/*.md stay enterable: a short README, and no link that leads nowhere.

Every relative link (images included) in README.md and docs/*.md must lead to an existing file,
and a ``#anchor`` into a markdown file must name one of its headings, slugged as GitHub does.
External http(s) and mailto links are not checked. The README stays under 12,000 characters and
names the three commands a newcomer needs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
README_LIMIT = 12_000

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target); the target stops at whitespace (an optional "title" follows).
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
MIN_LINKS = 30  # the docs link far more than this: fewer means the extraction broke


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (a ``# comment`` in a shell block is no heading)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lowercased, punctuation but hyphens dropped, spaces → hyphens."""
    text = INLINE_LINK.sub(r"\1", heading).lower()
    text = "".join(char for char in text if char.isalnum() or char in "-_ ")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor, with GitHub's -1, -2 … for repeated headings."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    targets = []
    for line in prose_lines(path.read_text(encoding="utf-8")):
        # Inline code is not a link: `[x](y)` in backticks is an example.
        targets.extend(LINK.findall(re.sub(r"`[^`]*`", "", line)))
    return targets


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in links(path):
        if EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and destination.suffix == ".md" and anchor.lower() not in anchors(destination):
            broken.append(f"{target}: {destination.name} has no heading with that anchor")
    return broken


def test_slug_follows_github() -> None:
    assert slug("Search at 100,000 chunks (`make bench-search`)") == "search-at-100000-chunks-make-bench-search"
    assert slug("Control endpoints and fault injection (tests)") == "control-endpoints-and-fault-injection-tests"
    assert slug("Limits (known, honest)") == "limits-known-honest"
    assert slug("`make bench-peers`: rag-ingest, LangChain") == "make-bench-peers-rag-ingest-langchain"


def test_headings_in_code_blocks_are_not_anchors(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n```bash\n# one document\n```\n\n## Title\n", encoding="utf-8")
    assert anchors(page) == {"title", "title-1"}


def test_broken_links_are_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n", encoding="utf-8")
    page.write_text(
        "# Page\n\n[ok](other.md#a-section) [self](#page) [web](https://example.com/x.md#nothing)\n"
        "[gone](missing.md) [bad anchor](other.md#no-such) ![img](img/none.png) `[code](not-a-link.md)`\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#no-such: other.md has no heading with that anchor",
        "img/none.png: no such file",
    ]


def test_the_checker_sees_the_links() -> None:
    assert sum(len(links(path)) for path in [README, *DOCS]) >= MIN_LINKS


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    assert broken_links(path) == []


def test_readme_is_short() -> None:
    size = len(README.read_text(encoding="utf-8"))
    assert size < README_LIMIT, f"README.md has {size} characters; move details to docs/"


@pytest.mark.parametrize("command", ["make demo", "make test", "make check"])
def test_readme_names_the_commands(command: str) -> None:
    assert command in README.read_text(encoding="utf-8")
