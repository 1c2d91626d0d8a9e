"""What the crawler reads from an HTML page: its links, its canonical URL and its robots meta tag.

``read_page(body, charset)`` parses with the standard library's ``html.parser`` (no tree is built)
and returns the raw ``<a href>`` values, ``<link rel=canonical>``, ``<base href>`` and whether
``<meta name=robots>`` says ``noindex`` or ``nofollow``. Imports nothing of the project.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

#: Links read from one page; a page with more is read up to here.
MAX_LINKS_PER_PAGE = 2_000


@dataclass
class PageLinks:
    hrefs: list[str] = field(default_factory=list)
    canonical: str | None = None
    base: str | None = None
    noindex: bool = False
    nofollow: bool = False


class _LinkParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found = PageLinks()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name.lower(): (value or "") for name, value in attrs}
        if tag == "a" and values.get("href") and len(self.found.hrefs) < MAX_LINKS_PER_PAGE:
            self.found.hrefs.append(values["href"])
        elif tag == "link" and "canonical" in values.get("rel", "").lower().split() and values.get("href"):
            self.found.canonical = self.found.canonical or values["href"]
        elif tag == "base" and values.get("href"):
            self.found.base = self.found.base or values["href"]
        elif tag == "meta" and values.get("name", "").lower() in ("robots", "rag-ingest-crawler"):
            directives = {part.strip() for part in values.get("content", "").lower().split(",")}
            self.found.noindex |= bool(directives & {"noindex", "none"})
            self.found.nofollow |= bool(directives & {"nofollow", "none"})


def read_page(body: bytes, charset: str | None = None) -> PageLinks:
    try:
        text = body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        text = body.decode("utf-8", errors="replace")
    parser = _LinkParser()
    parser.feed(text)
    parser.close()
    return parser.found
