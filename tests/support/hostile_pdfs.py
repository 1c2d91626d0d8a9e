"""A small adversarial PDF corpus, generated (never stored): each file is a few KB at most, yet
each attacks one part of a parser: decompression, recursion, cycles, quadratic text passes,
operator counts, image sizes, the cross-reference table.

Files are written object by object with exact ``xref`` offsets (unless the attack is the xref),
so pypdf reads them as their author meant: the attack reaches the code it targets.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

Objects = dict[int, bytes]


def build_pdf(objects: Objects, *, root: int = 1, xref_offsets: dict[int, int] | None = None) -> bytes:
    """A PDF 1.7 file of ``objects`` (number → body between ``obj`` and ``endobj``).

    ``xref_offsets`` overrides the offsets written in the table (a malformed xref).
    """
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += b"%d 0 obj\n" % number + objects[number] + b"\nendobj\n"
    size = max(objects) + 1
    xref_at = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for number in range(1, size):
        offset = (xref_offsets or {}).get(number, offsets.get(number, 0))
        out += b"%010d 00000 n \n" % offset if number in objects else b"0000000000 65535 f \n"
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, root, xref_at)
    return bytes(out)


def stream(data: bytes, *, compress: bool = False, extra: bytes = b"") -> bytes:
    if compress:
        data = zlib.compress(data, 9)
        extra += b" /Filter /FlateDecode"
    return b"<< /Length %d%s >>\nstream\n" % (len(data), extra) + data + b"\nendstream"


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def page_pdf(content: bytes, *, compress: bool = True, extra_objects: Objects | None = None) -> bytes:
    """One Letter page whose content stream is ``content`` (Helvetica as /F1)."""
    objects: Objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        3: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> /XObject << /Im1 6 0 R >> >> >>",
        4: stream(content, compress=compress),
        5: _FONT,
        6: stream(
            b"\x00\x00\x00",
            extra=b" /Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceRGB /BitsPerComponent 8",
        ),
    }
    objects.update(extra_objects or {})
    return build_pdf(objects)


def text_page(text: bytes) -> bytes:
    return b"BT /F1 12 Tf 72 720 Td (" + text + b") Tj ET"


def honest_pdf() -> bytes:
    """A small, valid, one-page PDF with a sentence: the control."""
    return page_pdf(text_page(b"An honest page about lighthouses and their keepers."))


def flate_bomb() -> bytes:
    """A content stream of ~200 KB compressed that inflates to 200 MB of spaces and one sentence."""
    compressor = zlib.compressobj(9)
    body = compressor.compress(text_page(b"Before the bomb.") + b"\n")
    chunk = b" " * (1 << 20)
    for _ in range(200):
        body += compressor.compress(chunk)
    body += compressor.flush()
    return build_pdf(
        {
            1: b"<< /Type /Catalog /Pages 2 0 R >>",
            2: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            3: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            4: b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(body) + body + b"\nendstream",
            5: _FONT,
        }
    )


def nested_arrays(depth: int = 100_000) -> bytes:
    """An array nested ``depth`` deep, in the page's content stream and in an object the page uses."""
    deep = b"[" * depth + b"]" * depth
    return page_pdf(
        text_page(b"Text before the nesting.") + b"\n" + deep + b" pop\n",
        extra_objects={7: deep},
    )


def cyclic_page_tree() -> bytes:
    """A page tree whose intermediate node lists its own parent among its kids."""
    return build_pdf(
        {
            1: b"<< /Type /Catalog /Pages 2 0 R >>",
            2: b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
            3: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R "
            b"/Resources << /Font << /F1 6 0 R >> >> >>",
            4: b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R 4 0 R] /Count 1 >>",
            5: stream(text_page(b"The one real page of a cyclic tree.")),
            6: _FONT,
        }
    )


def enormous_word(letters: int = 300_000) -> bytes:
    """One page showing a single word of ``letters`` letters (the quadratic-hyphen-regex case)."""
    word = (b"abcdefghij" * (letters // 10 + 1))[:letters]
    return page_pdf(text_page(b"Start " + word + b" end."))


def many_text_operators(count: int = 400_000) -> bytes:
    """One valid page with ``count`` short text-showing operators (a few KB compressed)."""
    lines = [b"BT /F1 1 Tf 10 10 Td"]
    lines.extend(b"(ab ) Tj" for _ in range(count))
    lines.append(b"ET")
    return page_pdf(b"\n".join(lines))


def huge_image() -> bytes:
    """A page with readable text and an image that declares 100,000 by 100,000 RGB pixels (30 GB),
    its data a tiny Flate stream."""
    data = zlib.compress(b"\x00" * 1024)
    image = (
        b"<< /Type /XObject /Subtype /Image /Width 100000 /Height 100000 /ColorSpace /DeviceRGB "
        b"/BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"
    )
    content = text_page(b"A caption under a very large picture.") + b"\nq 612 0 0 792 0 0 cm /Im1 Do Q"
    return page_pdf(content, extra_objects={6: image})


def malformed_xref() -> bytes:
    """Every xref offset points into the middle of nowhere (a reader must rebuild the table)."""
    objects: Objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        3: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        4: stream(text_page(b"Offsets lie, but the objects are all here.")),
        5: _FONT,
    }
    return build_pdf(objects, xref_offsets={number: 7 + number * 9973 for number in objects})


def object_stream_loop() -> bytes:
    """Objects 3 and 4 live in object streams 6 and 7, which each claim to live in the other;
    a cross-reference *stream* (PDF 1.5) says so."""
    header = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"
    out = bytearray(header)
    offsets: dict[int, int] = {}
    plain = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        5: _FONT,
    }
    for number, body in plain.items():
        offsets[number] = len(out)
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    # Object streams whose contents would be objects 3 and 4; the xref says 6 is in 7 and 7 in 6.
    inner = b"3 0 4 200 << /Type /Page /Parent 2 0 R /Contents 4 0 R >> "
    for number in (6, 7):
        offsets[number] = len(out)
        out += b"%d 0 obj\n" % number + stream(inner, extra=b" /Type /ObjStm /N 2 /First 10") + b"\nendobj\n"
    xref_number = 8
    offsets[xref_number] = len(out)
    rows = bytearray()
    for number in range(0, xref_number + 1):
        if number == 0:
            rows += bytes([0, 0, 0, 0, 0xFF, 0xFF])
        elif number in (3, 4):
            rows += bytes([2, 0, 0, 6, 0, number - 3])  # in object stream 6
        elif number == 6:
            rows += bytes([2, 0, 0, 7, 0, 0])  # object stream 6 is itself inside 7 ...
        elif number == 7:
            rows += bytes([2, 0, 0, 6, 0, 0])  # ... and 7 inside 6
        else:
            rows += bytes([1]) + offsets[number].to_bytes(4, "big") + bytes([0])
    xref_stream = stream(
        bytes(rows),
        extra=b" /Type /XRef /Size %d /W [1 4 1] /Root 1 0 R" % (xref_number + 1),
    )
    out += b"%d 0 obj\n" % xref_number + xref_stream + b"\nendobj\n"
    out += b"startxref\n%d\n%%%%EOF\n" % offsets[xref_number]
    return bytes(out)


#: name → generator, for parametrised tests.
HOSTILE_PDFS: dict[str, Callable[[], bytes]] = {
    "flate-bomb": flate_bomb,
    "nested-arrays": nested_arrays,
    "cyclic-page-tree": cyclic_page_tree,
    "enormous-word": enormous_word,
    "many-text-operators": many_text_operators,
    "huge-image": huge_image,
    "malformed-xref": malformed_xref,
    "object-stream-loop": object_stream_loop,
}
