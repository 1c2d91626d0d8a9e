"""The formats beside PDF: real DOCX, PPTX, HTML, Markdown and text documents, written by
python-docx and python-pptx (by hand for the markup formats), and the hostile ones of
docs/formats.md, generated the same way for the tests and on demand.

Each valid document holds a few facts in its format's own structure (headings, a table, slides),
so a test can ask where a passage stands.

    .venv/bin/python -m samples.documents                    # samples/formats/ (checked in)
    .venv/bin/python -m samples.documents --hostile DIR      # the hostile files too (~22 MB), in DIR
"""

from __future__ import annotations

import argparse
import io
import re
import zipfile
from pathlib import Path

DOCX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    document.core_properties.title = "Harbour Operations Manual"
    document.add_heading("Harbour Operations Manual", 0)
    document.add_paragraph("This manual describes how the harbour of Port Ellery runs its berths and cranes.")
    document.add_heading("Berths", 1)
    document.add_paragraph("Port Ellery has nine berths along the northern quay, dredged to fourteen metres.")
    document.add_heading("Mooring rules", 2)
    document.add_paragraph("Vessels longer than 200 metres moor only at berths seven to nine.")
    document.add_paragraph("Every mooring line is inspected by the berth master before cargo work starts.")
    document.add_heading("Cranes", 1)
    document.add_paragraph("The harbour operates four gantry cranes; their ratings are listed below.")
    table = document.add_table(rows=4, cols=3)
    for row, cells in enumerate(
        [
            ("Crane", "Lift capacity", "Outreach"),
            ("G1", "40 tonnes", "45 m"),
            ("G2", "65 tonnes", "52 m"),
            ("G3", "65 tonnes", "60 m"),
        ]
    ):
        for column, text in enumerate(cells):
            table.cell(row, column).text = text
    document.add_paragraph("Crane G4 is under repair until the spring inspection.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def pptx_bytes(slides: int = 3) -> bytes:
    import pptx
    from pptx.util import Inches

    presentation = pptx.Presentation()
    presentation.core_properties.title = "Orchard Survey Results"
    first = presentation.slides.add_slide(presentation.slide_layouts[1])
    first.shapes.title.text = "Orchard Survey Results"
    first.placeholders[1].text = "The survey counted 2,400 apple trees across six orchards.\nPear trees numbered 310."
    second = presentation.slides.add_slide(presentation.slide_layouts[5])
    second.shapes.title.text = "Yield by orchard"
    table = second.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(1.5)).table
    for row, (orchard, tonnes) in enumerate(
        [("Orchard", "Tonnes per hectare"), ("Westfield", "31"), ("Marsh End", "18")]
    ):
        table.cell(row, 0).text = orchard
        table.cell(row, 1).text = tonnes
    second.notes_slide.notes_text_frame.text = "Marsh End suffered a late frost in April."
    for number in range(3, slides + 1):
        slide = presentation.slides.add_slide(presentation.slide_layouts[1])
        slide.shapes.title.text = f"Pest control, part {number - 2}"
        slide.placeholders[1].text = "Codling moth traps were checked weekly from May to August."
    buffer = io.BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()


HTML_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Lighthouse Keeping</title>
<script>var tracking = "should never be indexed";</script><style>body { color: black }</style></head>
<body>
<header><a href="/">Coastal Trust</a> <span>Home | Visit | Donate</span></header>
<nav><ul><li><a href="/a">About us</a></li><li><a href="/b">Shop</a></li></ul></nav>
<div id="cookie-consent">We use cookies to improve your experience. <button>Accept all</button></div>
<main>
<article>
<h1>Lighthouse Keeping</h1>
<p>Keepers trimmed the lamp wicks every four hours through the night.</p>
<h2>Lamps and lenses</h2>
<p>The Fresnel lens of the Skerry light focused a paraffin flame into a beam seen thirty kilometres out.</p>
<table><caption>Lights of the coast</caption>
<thead><tr><th>Light</th><th>Range</th><th>Lit</th></tr></thead>
<tbody><tr><td>Skerry</td><td>30 km</td><td>1851</td></tr>
<tr><td>Gull Point</td><td>22 km</td><td>1874</td></tr></tbody>
</table>
<h2>Daily routine</h2>
<p>At dawn the keeper drew the curtains around the lens to shield it from the sun.</p>
</article>
</main>
<aside>Related: ten best beaches</aside>
<footer>Copyright Coastal Trust. Privacy policy.</footer>
</body></html>
"""

MARKDOWN_TEXT = """# Sourdough Starter Guide

A starter is a culture of wild yeast and lactic acid bacteria kept in flour and water.

## Feeding

Feed the starter every twelve hours with equal weights of flour and water.

| Flour | Water | Hydration |
|-------|-------|-----------|
| 100 g | 100 g | 100 % |
| 100 g | 75 g | 75 % |

## Storage

A fed starter keeps for a week in the refrigerator at four degrees.
"""

PLAIN_TEXT = """Canal Locks

A lock raises or lowers boats between stretches of water at different levels.

How a Lock Works

The lock keeper closes the lower gates and opens the upper sluices until the chamber fills.
The boat then leaves through the upper gates.
"""


# -- hostile documents -----------------------------------------------------------------------------
def zip_bomb_docx(unzipped_bytes: int = 600 * 1024 * 1024) -> bytes:
    """A DOCX whose word/document.xml decompresses to ``unzipped_bytes`` of spaces (~1,000:1)."""
    source = zipfile.ZipFile(io.BytesIO(docx_bytes()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bomb:
        for entry in source.infolist():
            if entry.filename == "word/document.xml":
                with bomb.open(entry.filename, "w", force_zip64=True) as part:
                    part.write(source.read(entry.filename))
                    block = b" " * (1024 * 1024)
                    for _ in range(unzipped_bytes // len(block)):
                        part.write(block)
            else:
                bomb.writestr(entry, source.read(entry.filename))
    return buffer.getvalue()


def _replace_part(data: bytes, name: str, content: bytes) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(data))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for entry in source.infolist():
            target.writestr(entry, content if entry.filename == name else source.read(entry.filename))
    return buffer.getvalue()


def entity_expansion_docx() -> bytes:
    """ "Billion laughs": word/document.xml declares nested entities."""
    source = zipfile.ZipFile(io.BytesIO(docx_bytes())).read("word/document.xml")
    entities = '<!ENTITY lol "lol">' + "".join(
        f'<!ENTITY lol{level} "{("&lol" + (str(level - 1) if level > 1 else "") + ";") * 10}">'
        for level in range(1, 10)
    )
    declaration, _, body = source.partition(b"?>")
    hostile = (
        declaration
        + b"?>"
        + f"<!DOCTYPE w:document [{entities}]>".encode()
        + body.replace(b"Vessels longer", b"&lol9; Vessels longer", 1)
    )
    return _replace_part(docx_bytes(), "word/document.xml", hostile)


def external_entity_docx() -> bytes:
    """XXE: word/document.xml declares an external entity naming a local file."""
    source = zipfile.ZipFile(io.BytesIO(docx_bytes())).read("word/document.xml")
    declaration, _, body = source.partition(b"?>")
    hostile = (
        declaration
        + b'?><!DOCTYPE w:document [<!ENTITY secret SYSTEM "file:///etc/passwd">]>'
        + body.replace(b"Vessels longer", b"&secret; Vessels longer", 1)
    )
    return _replace_part(docx_bytes(), "word/document.xml", hostile)


SLIDE_RELATIONSHIP = b"http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide"


def many_slides_pptx(slides: int = 10_000) -> bytes:
    """A real PPTX of ``slides`` slides: the one-slide deck's slide part copied, each listed in
    the presentation, its relationships and the content types."""
    source = zipfile.ZipFile(io.BytesIO(pptx_bytes(slides=1)))
    parts = {entry.filename: source.read(entry.filename) for entry in source.infolist()}
    # pptx_bytes always has two slides at least; keep slide1 as the template, drop the others.
    template = parts["ppt/slides/slide1.xml"]
    template_rels = parts["ppt/slides/_rels/slide1.xml.rels"]
    for name in [name for name in parts if re.match(r"ppt/(slides|notesSlides)/(_rels/)?\w+\d+\.xml", name)]:
        del parts[name]
    presentation_rels = re.sub(
        rb'<Relationship [^>]*relationships/slide"[^>]*/>', b"", parts["ppt/_rels/presentation.xml.rels"]
    )
    presentation = re.sub(rb"<p:sldIdLst>.*?</p:sldIdLst>", b"", parts["ppt/presentation.xml"], flags=re.DOTALL)
    content_types = re.sub(rb'<Override PartName="/ppt/(slides|notesSlides)/[^>]*/>', b"", parts["[Content_Types].xml"])
    slide_type = b"application/vnd.openxmlformats-officedocument.presentationml.slide+xml"
    ids, relationships, overrides = [], [], []
    notes_rel = re.compile(rb'<Relationship [^>]*notesSlide"[^>]*/>')
    for number in range(1, slides + 1):
        ids.append(b'<p:sldId id="%d" r:id="rIdS%d"/>' % (255 + number, number))
        relationships.append(
            b'<Relationship Id="rIdS%d" Type="%s" Target="slides/slide%d.xml"/>' % (number, SLIDE_RELATIONSHIP, number)
        )
        overrides.append(b'<Override PartName="/ppt/slides/slide%d.xml" ContentType="%s"/>' % (number, slide_type))
        parts[f"ppt/slides/slide{number}.xml"] = template
        parts[f"ppt/slides/_rels/slide{number}.xml.rels"] = notes_rel.sub(b"", template_rels)
    presentation = presentation.replace(
        b"</p:sldMasterIdLst>", b"</p:sldMasterIdLst><p:sldIdLst>" + b"".join(ids) + b"</p:sldIdLst>", 1
    )
    parts["ppt/presentation.xml"] = presentation
    parts["ppt/_rels/presentation.xml.rels"] = presentation_rels.replace(
        b"</Relationships>", b"".join(relationships) + b"</Relationships>"
    )
    parts["[Content_Types].xml"] = content_types.replace(b"</Types>", b"".join(overrides) + b"</Types>")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for name, content in parts.items():
            target.writestr(name, content)
    return buffer.getvalue()


def deeply_nested_html(levels: int = 100_000) -> bytes:
    return b"<!DOCTYPE html><html><body>" + b"<div>" * levels + b"deep text" + b"</div>" * levels + b"</body></html>"


def one_line_markdown(size: int = 10 * 1024 * 1024) -> bytes:
    """# A heading, then one line of ``size`` bytes of inline markup (the slow case of the parser)."""
    line = (b"*a_ [x](y " * (size // 10 + 1))[:size]
    return b"# Heading\n\n" + line + b"\n"


def macro_enabled(data: bytes, main_part: str) -> bytes:
    """The same package declared macro-enabled (a .docm/.pptm's main content type)."""
    content_types = zipfile.ZipFile(io.BytesIO(data)).read("[Content_Types].xml")
    replaced = re.sub(
        rb'(PartName="/' + main_part.encode() + rb'" ContentType=")[^"]+"',
        rb'\1application/vnd.ms-word.document.macroEnabled.main+xml"',
        content_types,
    )
    return _replace_part(data, "[Content_Types].xml", replaced)


def ole2_document() -> bytes:
    """The start of a legacy binary Office file (an OLE2 compound file header and padding)."""
    return b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 16 + b"\x3e\x00\x03\x00\xfe\xff" + b"\x00" * 4066


def undecodable_text(size: int = 20_000) -> bytes:
    """Bytes with no NUL that are no text in any encoding the detector trusts (seeded noise)."""
    import random

    generator = random.Random(7)
    return bytes(generator.randrange(0x80, 0x100) for _ in range(size))


def image_only_pptx(png: bytes) -> bytes:
    """A deck of two slides that hold a picture each and no text at all."""
    import pptx
    from pptx.util import Inches

    presentation = pptx.Presentation()
    for _ in range(2):
        slide = presentation.slides.add_slide(presentation.slide_layouts[6])  # the blank layout
        slide.shapes.add_picture(io.BytesIO(png), Inches(1), Inches(1))
    buffer = io.BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()


FORMATS_DIR = Path(__file__).resolve().parent / "formats"


def valid_documents() -> dict[str, bytes]:
    return {
        "harbour-manual.docx": docx_bytes(),
        "orchard-survey.pptx": pptx_bytes(),
        "lighthouse-keeping.html": HTML_PAGE.encode(),
        "sourdough-starter.md": MARKDOWN_TEXT.encode(),
        "canal-locks.txt": PLAIN_TEXT.encode(),
    }


def hostile_documents() -> dict[str, bytes]:
    """What docs/formats.md's "Hostile inputs" lists, each named by what it is."""
    return {
        "zip-bomb.docx": zip_bomb_docx(),
        "entity-expansion.docx": entity_expansion_docx(),
        "external-entity.docx": external_entity_docx(),
        "10000-slides.pptx": many_slides_pptx(),
        "100000-nested.html": deeply_nested_html(),
        "10mb-line.md": one_line_markdown(),
        "legacy.doc": ole2_document(),
        "macros.docm": macro_enabled(docx_bytes(), "word/document.xml"),
        "unknown-encoding.txt": undecodable_text(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hostile", type=Path, help="also write the hostile documents into this folder")
    options = parser.parse_args()
    FORMATS_DIR.mkdir(exist_ok=True)
    for name, data in valid_documents().items():
        (FORMATS_DIR / name).write_bytes(data)
        print(f"{FORMATS_DIR / name}: {len(data):,} bytes")
    if options.hostile:
        options.hostile.mkdir(parents=True, exist_ok=True)
        for name, data in hostile_documents().items():
            (options.hostile / name).write_bytes(data)
            print(f"{options.hostile / name}: {len(data):,} bytes")


if __name__ == "__main__":
    main()
