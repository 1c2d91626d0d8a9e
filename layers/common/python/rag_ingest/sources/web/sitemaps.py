"""Sitemaps (sitemaps.org): a ``urlset`` lists pages, a ``sitemapindex`` lists more sitemaps.

``parse_sitemap`` reads one document, gzipped or not, through ``defusedxml`` (a document type
declaration is refused outright: no entity expansion, no external entity), capped at
``MAX_SITEMAP_BYTES`` once inflated and ``MAX_SITEMAP_URLS`` locations. Loops (an index that lists
itself) are the crawler's to stop: it fetches a sitemap URL once per listing, and at most
``MAX_SITEMAPS`` of them. Imports nothing of the project.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Literal

from defusedxml import DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
from defusedxml.ElementTree import ParseError, fromstring

MAX_SITEMAPS = 50
#: The protocol's own bounds for one sitemap file.
MAX_SITEMAP_BYTES = 50 * 1024 * 1024
MAX_SITEMAP_URLS = 50_000
_GZIP_MAGIC = b"\x1f\x8b"


class SitemapError(ValueError):
    pass


@dataclass(frozen=True)
class Sitemap:
    kind: Literal["urlset", "sitemapindex"]
    locations: tuple[str, ...]


def _inflate(body: bytes) -> bytes:
    if not body.startswith(_GZIP_MAGIC):
        return body
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, MAX_SITEMAP_BYTES + 1)
    except zlib.error as exc:
        raise SitemapError(f"not valid gzip: {exc}") from exc
    if len(data) > MAX_SITEMAP_BYTES:
        raise SitemapError(f"the sitemap inflates past {MAX_SITEMAP_BYTES} bytes")
    return data


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def parse_sitemap(body: bytes) -> Sitemap:
    if len(body) > MAX_SITEMAP_BYTES:
        raise SitemapError(f"the sitemap is over {MAX_SITEMAP_BYTES} bytes")
    data = _inflate(body)
    try:
        root = fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except (DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden) as exc:
        raise SitemapError("the sitemap has a document type declaration") from exc
    except ParseError as exc:
        raise SitemapError(f"not well-formed XML: {exc}") from exc
    kind = _local(root.tag)
    if kind not in ("urlset", "sitemapindex"):
        raise SitemapError(f"not a sitemap: the root element is <{kind}>")
    entry = "url" if kind == "urlset" else "sitemap"
    locations: list[str] = []
    for child in root:
        if _local(child.tag) != entry:
            continue
        for field in child:
            if _local(field.tag) == "loc" and field.text and field.text.strip():
                locations.append(field.text.strip())
        if len(locations) > MAX_SITEMAP_URLS:
            raise SitemapError(f"the sitemap lists over {MAX_SITEMAP_URLS} locations")
    return Sitemap(kind="urlset" if kind == "urlset" else "sitemapindex", locations=tuple(locations))
