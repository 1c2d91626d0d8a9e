"""Small-to-big: a search's matched chunks returned as their section or page (``Expand``).

``expand_hits`` groups the hits (best first) by parent: a section is the document version's run of
chunks under the hit's heading path, a page the chunks whose pages overlap the hit's. Each group is
one result: the best hit's score and citation, the matched chunk ids and boxes, and the parent's
chunks joined in order (the overlap the chunker repeats dropped), cut to ``max_tokens`` around the
matched chunks (``truncated``); a matched chunk the cut leaves out starts a result of its own.
Why, and the measurements: docs/retrieval.md, "Small-to-big".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from rag_ingest.core.ids import split_chunk_id
from rag_ingest.core.parsed import PassageBox
from rag_ingest.core.settings import EXPAND_MAX_TOKENS, EXPAND_RADIUS_CHUNKS
from rag_ingest.core.tokens import count_tokens
from rag_ingest.retrieval.hits import SearchHit
from rag_ingest.retrieval.ports import ParentScope, PassageRetriever
from rag_ingest.retrieval.query import Expand, SearchQuery

#: What joins two chunks that do not overlap (the chunker's page and paragraph break).
CHUNK_SEPARATOR = "\n\n"
# The shortest repeat taken for the chunker's overlap: a shorter one may be a coincidence.
_MIN_OVERLAP_CHARS = 12


def expand_hits(
    store: PassageRetriever,
    query: SearchQuery,
    hits: Sequence[SearchHit],
    *,
    max_tokens: int = EXPAND_MAX_TOKENS,
    radius: int = EXPAND_RADIUS_CHUNKS,
) -> list[SearchHit]:
    """``hits`` (best first) as ``query.expand`` asks: unchanged for ``none``, else one result per
    parent, in the order of each one's best hit (module doc)."""
    if query.expand is Expand.NONE or not hits:
        return list(hits)
    rank = {hit.chunk_id: position for position, hit in enumerate(hits)}
    pending = group_hits(hits, query.expand)
    results: list[SearchHit] = []
    while pending:
        scopes = [parent_scope(group, query.expand, radius) for group in pending]
        fetched = store.parent_chunks(query, scopes)
        left_over: list[list[SearchHit]] = []
        for group, scope, chunks in zip(pending, scopes, fetched, strict=True):
            result, outside = merge_group(group, chunks, scope, max_tokens=max_tokens)
            results.append(result)
            if outside:
                left_over.append(outside)
        pending = left_over
    return sorted(results, key=lambda result: rank[result.chunk_id])


def group_hits(hits: Sequence[SearchHit], expand: Expand) -> list[list[SearchHit]]:
    """The hits by parent, each group best first, groups in the order of their best hit."""
    groups: list[list[SearchHit]] = []
    for hit in hits:
        home = next((group for group in groups if _shares_parent(group, hit, expand)), None)
        if home is None:
            groups.append([hit])
        else:
            home.append(hit)
    return groups


def _shares_parent(group: Sequence[SearchHit], hit: SearchHit, expand: Expand) -> bool:
    best = group[0]
    if split_chunk_id(best.chunk_id)[:2] != split_chunk_id(hit.chunk_id)[:2]:
        return False  # another document, or another version of it
    if expand is Expand.SECTION:
        return hit.heading_path == best.heading_path
    first, last = min(h.page_start for h in group), max(h.page_end for h in group)
    return hit.page_start <= last and hit.page_end >= first


def parent_scope(group: Sequence[SearchHit], expand: Expand, radius: int = EXPAND_RADIUS_CHUNKS) -> ParentScope:
    """Where a group's parent chunks are: ``radius`` chunks either side of its matched ones."""
    document_id, hashed, _ = split_chunk_id(group[0].chunk_id)
    indexes = [split_chunk_id(hit.chunk_id)[2] for hit in group]
    return ParentScope(
        document_id=document_id,
        version_hash=hashed,
        expand=expand,
        first_chunk=max(0, min(indexes) - radius),
        last_chunk=max(indexes) + radius,
        heading_path=group[0].heading_path,
        page_start=min(hit.page_start for hit in group),
        page_end=max(hit.page_end for hit in group),
    )


@dataclass(frozen=True)
class _Piece:
    """One chunk of a parent as it is added to the text: after the previous chunk, what is new."""

    hit: SearchHit
    index: int
    alone: str  # its whole text: what a window that starts with it starts with
    after_previous: str  # what it adds after the previous chunk (separator included)


def merge_group(
    group: Sequence[SearchHit],
    chunks: Sequence[SearchHit],
    scope: ParentScope,
    *,
    max_tokens: int = EXPAND_MAX_TOKENS,
    count: Callable[[str], int] = count_tokens,
) -> tuple[SearchHit, list[SearchHit]]:
    """One result of ``group`` from its parent's ``chunks`` (any order), and the group's hits the
    cut to ``max_tokens`` left out (best first; empty when all fit)."""
    best = group[0]
    by_id = {chunk.chunk_id: chunk for chunk in chunks}
    for hit in group:
        by_id.setdefault(hit.chunk_id, hit)  # a matched chunk is always part of its parent
    matched = {hit.chunk_id for hit in group}
    ordered = _runs_with_matches(sorted(by_id.values(), key=_index), matched)
    pieces = _pieces(ordered)
    position = {piece.hit.chunk_id: i for i, piece in enumerate(pieces)}
    lo, hi = _window(pieces, [position[hit.chunk_id] for hit in group], max_tokens, count)
    window = pieces[lo : hi + 1]
    inside = [hit for hit in group if lo <= position[hit.chunk_id] <= hi]
    outside = [hit for hit in group if not lo <= position[hit.chunk_id] <= hi]
    # Cut: chunks of the parent left out here, or (at the fetched range's ends) beyond it.
    first, last = window[0].index, window[-1].index
    truncated = lo > 0 or hi < len(pieces) - 1 or (first == scope.first_chunk and first > 0) or last == scope.last_chunk
    # A long figure is several chunks with one rectangle: it stays a figure, and its rectangle is said once.
    boxes = {_box_key(box): box for hit in inside for box in hit.boxes}
    one_figure = len({(piece.hit.figure_sources, tuple(map(_box_key, piece.hit.boxes))) for piece in window}) == 1
    result = replace(
        best,
        text=window[0].alone + "".join(piece.after_previous for piece in window[1:]),
        page_start=min(piece.hit.page_start for piece in window),
        page_end=max(piece.hit.page_end for piece in window),
        boxes=tuple(boxes.values()),
        # A parent of more than one figure's passage is text around it, not a figure.
        figure_sources=best.figure_sources if one_figure else None,
        highlights=_union(hit.highlights for hit in inside),
        retrieved_by=_union(hit.retrieved_by for hit in inside),
        copies=tuple(copy for hit in inside for copy in hit.copies),
        expanded=scope.expand,
        chunk_ids=tuple(hit.chunk_id for hit in inside),
        truncated=truncated,
    )
    return result, outside


def _index(hit: SearchHit) -> int:
    return split_chunk_id(hit.chunk_id)[2]


def _runs_with_matches(ordered: list[SearchHit], matched: set[str]) -> list[SearchHit]:
    """The runs of consecutive chunk indexes that hold a matched chunk (a heading path repeated
    further on in the document is another section)."""
    runs: list[list[SearchHit]] = []
    for chunk in ordered:
        if runs and _index(chunk) == _index(runs[-1][-1]) + 1:
            runs[-1].append(chunk)
        else:
            runs.append([chunk])
    return [chunk for run in runs if any(c.chunk_id in matched for c in run) for chunk in run]


def _pieces(ordered: Sequence[SearchHit]) -> list[_Piece]:
    pieces: list[_Piece] = []
    for position, chunk in enumerate(ordered):
        index = _index(chunk)
        if position and index == pieces[-1].index + 1:
            after = after_overlap(ordered[position - 1].text, chunk.text)
        else:
            after = CHUNK_SEPARATOR + chunk.text
        pieces.append(_Piece(chunk, index, chunk.text, after))
    return pieces


def after_overlap(previous: str, current: str) -> str:
    """What ``current`` adds after ``previous``: without the start it repeats of ``previous``'s end
    (the chunker's overlap of whole sentences; a table chunk's repeated header row first), else
    all of it after ``CHUNK_SEPARATOR``."""
    tail = _overlap_tail(previous, current)
    if tail is not None:
        return tail
    header, newline, rows = current.partition("\n")
    if newline and header.strip() and header in previous:
        tail = _overlap_tail(previous, rows)
        if tail is not None:
            return tail
    return CHUNK_SEPARATOR + current


def _overlap_tail(previous: str, current: str) -> str | None:
    """``current`` after its longest start that ends ``previous`` (word-aligned on both sides,
    at least ``_MIN_OVERLAP_CHARS`` long); None when there is none."""
    for start in range(max(0, len(previous) - len(current)), len(previous) - _MIN_OVERLAP_CHARS + 1):
        if start and not previous[start - 1].isspace():
            continue
        repeated = previous[start:]
        if current.startswith(repeated) and (len(repeated) == len(current) or current[len(repeated)].isspace()):
            return current[len(repeated) :]
    return None


def _window(
    pieces: Sequence[_Piece], matched: Sequence[int], max_tokens: int, count: Callable[[str], int]
) -> tuple[int, int]:
    """The positions ``lo..hi`` of the returned chunks: the best match (``matched[0]``), the other
    matches that fit in rank order, then neighbours on alternate sides while the text fits."""
    alone = [count(piece.alone) for piece in pieces]
    added = [count(piece.after_previous) for piece in pieces]

    def tokens(lo: int, hi: int) -> int:
        return alone[lo] + sum(added[lo + 1 : hi + 1])

    lo = hi = matched[0]
    for position in matched[1:]:
        wider = (min(lo, position), max(hi, position))
        if tokens(*wider) <= max_tokens:
            lo, hi = wider
    grew = True
    while grew:
        grew = False
        if hi + 1 < len(pieces) and tokens(lo, hi + 1) <= max_tokens:
            hi, grew = hi + 1, True
        if lo > 0 and tokens(lo - 1, hi) <= max_tokens:
            lo, grew = lo - 1, True
    return lo, hi


def _union(values: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for group in values:
        seen.update(dict.fromkeys(group))
    return tuple(seen)


def _box_key(box: PassageBox) -> tuple[int, float, float, float, float]:
    return (box.page, box.x0, box.y0, box.x1, box.y1)
