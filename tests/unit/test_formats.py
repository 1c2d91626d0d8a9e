"""Formats: the type comes from the bytes; each format reads into blocks with its provenance; every
hostile file is a permanent code in seconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import BlockKind, DocumentFormat, PageText
from rag_ingest.parsing.formats import SNIFF_BYTES, FormatLimits, detect_format, read_structured

from samples import documents

pytestmark = pytest.mark.unit

SAMPLES_PDF = "samples/lighthouses.pdf"
LIMITS = FormatLimits(max_pages=500)
SECONDS = 20.0  # generous: "seconds", not the function's timeout


def detect(data: bytes) -> DocumentFormat:
    return detect_format(data[:SNIFF_BYTES], size=len(data), max_bytes=200 * 1024 * 1024, read_all=lambda: data)


def read(data: bytes) -> list[PageText]:
    return read_structured(data, detect(data), LIMITS).pages


def block_texts(page: PageText, kind: BlockKind) -> list[str]:
    return [page.text[block.start : block.end] for block in page.blocks if block.kind is kind]


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (documents.docx_bytes, DocumentFormat.DOCX),
        (documents.pptx_bytes, DocumentFormat.PPTX),
        (lambda: documents.HTML_PAGE.encode(), DocumentFormat.HTML),
        (lambda: documents.MARKDOWN_TEXT.encode(), DocumentFormat.MARKDOWN),
        (lambda: documents.PLAIN_TEXT.encode(), DocumentFormat.TEXT),
        (lambda: open(SAMPLES_PDF, "rb").read(), DocumentFormat.PDF),  # noqa: SIM115
    ],
)
def test_the_format_is_read_from_the_bytes(make: Callable[[], bytes], expected: DocumentFormat) -> None:
    assert detect(make()) is expected


def test_a_text_file_that_mentions_the_pdf_signature_is_text() -> None:
    assert detect(b"Every PDF starts with %PDF-1.7 and ends with %%EOF.\n") is DocumentFormat.TEXT
    # ...and one that shows SVG markup after prose, or HTML with an inline <svg>, is not an SVG image.
    assert detect(b"Draw it with <svg width='10'> and a path.\n") is DocumentFormat.TEXT
    assert detect(b"<html><body><svg><circle/></svg><p>Hi</p></body></html>") is DocumentFormat.HTML


@pytest.mark.parametrize(
    ("data", "code", "words"),
    [
        (documents.ole2_document(), ErrorCode.LEGACY_OFFICE_FORMAT, "OLE2"),
        (b"GIF89a" + b"\x00" * 64, ErrorCode.UNSUPPORTED_TYPE, "GIF image"),
        (b"text with a \x00 NUL byte", ErrorCode.UNSUPPORTED_TYPE, "binary"),
        (
            b'<?xml version="1.0"?>\n<!-- drawn -->\n<svg xmlns="http://www.w3.org/2000/svg"><text>Hi</text></svg>',
            ErrorCode.UNSUPPORTED_TYPE,
            "SVG image",
        ),
        (b"", ErrorCode.EMPTY_FILE, "empty"),
    ],
)
def test_refusals_name_what_the_file_is(data: bytes, code: ErrorCode, words: str) -> None:
    with pytest.raises(PermanentError) as caught:
        detect(data)
    assert caught.value.code is code and words in caught.value.detail


def test_macro_enabled_office_files_have_their_own_code() -> None:
    with pytest.raises(PermanentError) as caught:
        detect(documents.macro_enabled(documents.docx_bytes(), "word/document.xml"))
    assert caught.value.code is ErrorCode.MACRO_ENABLED_DOCUMENT


def test_a_zip_that_is_not_an_office_document_is_refused() -> None:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(PermanentError) as caught:
        detect(buffer.getvalue())
    assert caught.value.code is ErrorCode.UNSUPPORTED_TYPE and "not an Office document" in caught.value.detail


def test_docx_headings_paragraphs_and_the_table_in_order() -> None:
    (page,) = read(documents.docx_bytes())
    headings = [(page.text[b.start : b.end], b.level, b.anchor) for b in page.blocks if b.kind is BlockKind.HEADING]
    assert headings == [
        ("Harbour Operations Manual", 1, "harbour-operations-manual"),
        ("Berths", 1, "berths"),
        ("Mooring rules", 2, "mooring-rules"),
        ("Cranes", 1, "cranes"),
    ]
    (table,) = block_texts(page, BlockKind.TABLE)
    assert table.splitlines() == [
        "Crane | Lift capacity | Outreach",
        "G1 | 40 tonnes | 45 m",
        "G2 | 65 tonnes | 52 m",
        "G3 | 65 tonnes | 60 m",
    ]
    # Document order: the table sits between the paragraph before it and the one after it.
    assert page.text.index("ratings are listed below") < page.text.index("G1 | 40") < page.text.index("G4 is under")


def test_pptx_is_a_page_per_slide_with_the_title_as_its_heading_and_the_notes() -> None:
    pages = read(documents.pptx_bytes(slides=4))
    assert [page.page_number for page in pages] == [1, 2, 3, 4]
    assert [page.blocks[0].anchor for page in pages] == ["slide-1", "slide-2", "slide-3", "slide-4"]
    assert block_texts(pages[1], BlockKind.HEADING) == ["Yield by orchard"]
    assert block_texts(pages[1], BlockKind.TABLE) == ["Orchard | Tonnes per hectare\nWestfield | 31\nMarsh End | 18"]
    assert "Notes: Marsh End suffered a late frost in April." in pages[1].text
    assert "2,400 apple trees" in pages[0].text


def test_html_keeps_the_article_and_drops_navigation_banners_and_scripts() -> None:
    document = read_structured(documents.HTML_PAGE.encode(), DocumentFormat.HTML, LIMITS)
    (page,) = document.pages
    assert document.title == "Lighthouse Keeping"
    for boilerplate in ("Coastal Trust", "About us", "cookies", "tracking", "ten best beaches", "Privacy", "color"):
        assert boilerplate not in page.text, boilerplate
    assert block_texts(page, BlockKind.HEADING) == ["Lighthouse Keeping", "Lamps and lenses", "Daily routine"]
    assert block_texts(page, BlockKind.TABLE) == [
        "Light | Range | Lit\nSkerry | 30 km | 1851\nGull Point | 22 km | 1874"
    ]
    assert "Lights of the coast" in block_texts(page, BlockKind.PARAGRAPH)


def test_a_manuals_section_on_cookies_is_content_not_a_banner() -> None:
    html = (
        "<html><body><h2 id='id-Cookies'>State management</h2><div class='cookies'><p>Lynx keeps cookies"
        " in a file between sessions.</p></div><div class='cookie-notice'>We use cookies.</div>"
        "<div id='gdpr_banner'>Accept?</div></body></html>"
    )
    (page,) = read_structured(html.encode(), DocumentFormat.HTML, LIMITS).pages
    assert block_texts(page, BlockKind.HEADING) == ["State management"]
    assert "Lynx keeps cookies in a file between sessions." in page.text
    assert "We use cookies" not in page.text and "Accept?" not in page.text


def test_xhtml_with_an_xml_declaration_is_read() -> None:
    xhtml = (
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
        '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">\n'
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Chapter 4</title></head>'
        "<body><h1>Chapter 4</h1><p>Caf\u00e9 rules.</p></body></html>"
    ).encode()
    assert detect_format(xhtml, size=len(xhtml), max_bytes=1 << 20, read_all=lambda: xhtml) is DocumentFormat.HTML
    (page,) = read_structured(xhtml, DocumentFormat.HTML, LIMITS).pages
    assert block_texts(page, BlockKind.HEADING) == ["Chapter 4"]
    assert block_texts(page, BlockKind.PARAGRAPH) == ["Caf\u00e9 rules."]


def test_markdown_headings_and_its_pipe_table() -> None:
    document = read_structured(documents.MARKDOWN_TEXT.encode(), DocumentFormat.MARKDOWN, LIMITS)
    (page,) = document.pages
    assert document.title == "Sourdough Starter Guide"
    headings = [(page.text[b.start : b.end], b.level) for b in page.blocks if b.kind is BlockKind.HEADING]
    assert headings == [("Sourdough Starter Guide", 1), ("Feeding", 2), ("Storage", 2)]
    assert block_texts(page, BlockKind.TABLE) == [
        "Flour | Water | Hydration\n100 g | 100 g | 100 %\n100 g | 75 g | 75 %"
    ]


def test_plain_text_paragraphs_and_detected_headings() -> None:
    (page,) = read(documents.PLAIN_TEXT.encode())
    assert block_texts(page, BlockKind.HEADING) == ["Canal Locks", "How a Lock Works"]
    assert len(block_texts(page, BlockKind.PARAGRAPH)) == 2


def test_legacy_encodings_are_decoded() -> None:
    french = "Le pâtissier prépare une crème brûlée très légère pour le dîner de fête. " * 8
    (page,) = read(french.encode("cp1252"))
    assert "crème brûlée très légère" in page.text
    russian = "Маяк стоит на скалистом мысе и светит кораблям всю ночь до рассвета. " * 8
    (page,) = read(russian.encode("cp1251"))
    assert "Маяк стоит на скалистом мысе" in page.text
    utf16 = "Ein Leuchtturm steht auf der Klippe.\n".encode("utf-16")
    assert "Leuchtturm" in read(utf16)[0].text
    # Without a byte order mark (some Windows tools' "Unicode"), told by the NUL in every other byte.
    for encoding in ("utf-16-le", "utf-16-be"):
        assert "Klippe" in read("Ein Leuchtturm steht auf der Klippe.\n".encode(encoding))[0].text


def test_binary_data_with_nul_bytes_in_a_utf16_like_pattern_is_still_binary() -> None:
    # NULs at every other byte, but the other bytes control characters: not text.
    with pytest.raises(PermanentError) as caught:
        read(bytes([1, 0, 2, 0, 3, 0, 4, 0]) * 64)
    assert caught.value.code is ErrorCode.UNSUPPORTED_TYPE


CODE = "def berth_for(length):\n    if length > 200:\n        return 7\n    return 1"


def test_code_blocks_keep_their_indentation() -> None:
    # Markdown (fenced and indented), HTML's <pre> (indented in its source) and a Word paragraph in
    # a code style: the code's lines keep their indentation; prose lines are still stripped.
    fenced = f"# Berths\n\n  Prose,   indented.\n\n```python\n{CODE}\n```\n".encode()
    indented = "# Berths\n\nProse.\n\n" + "".join(f"    {line}\n" for line in CODE.split("\n"))
    html = "<html><body><h1>Berths</h1><pre>\n" + "".join(f"  {line}\n" for line in CODE.split("\n")) + "</pre>"
    for data in (fenced, indented.encode(), html.encode()):
        (page,) = read(data)
        assert CODE in page.text.split("\n\n"), page.text
    assert "Prose, indented." in read(fenced)[0].text
    # Spaces aligning columns inside a line are one (they cost tokens and mean nothing); tabs indent.
    aligned = "```c\nint\tx(void);\n\tint   y   =   2;\n```\n"
    assert read(aligned.encode())[0].text == "int x(void);\n        int y = 2;"

    import docx
    from docx.enum.style import WD_STYLE_TYPE

    document = docx.Document()
    document.styles.add_style("Source Code", WD_STYLE_TYPE.PARAGRAPH)
    document.add_paragraph("   Prose,   indented.")
    document.add_paragraph(CODE, style="Source Code")
    (page,) = read(_saved(document))
    assert page.text.split("\n\n") == ["Prose, indented.", CODE]


def test_a_sections_own_header_and_footer_are_read_and_the_pages_are_not() -> None:
    page_html = (
        "<html><body><header>Coastal Trust: Home | Visit</header><div>"
        "<section><header><h1>Harbour guide</h1><p>By Ann Reed</p></header><p>Nine berths.</p>"
        "<footer>Updated May 2024</footer></section></div><footer>Copyright Coastal Trust</footer></body></html>"
    )
    (page,) = read(page_html.encode())
    assert page.text.split("\n\n") == ["Harbour guide", "By Ann Reed", "Nine berths.", "Updated May 2024"]
    assert block_texts(page, BlockKind.HEADING) == ["Harbour guide"]
    in_main = "<html><body><main><header><h1>Harbour guide</h1></header><p>Nine berths.</p></main></body></html>"
    assert read(in_main.encode())[0].text == "Harbour guide\n\nNine berths."


def test_a_page_laid_out_in_table_cells_is_read_as_sections_and_a_data_table_stays_a_table() -> None:
    layout = (
        "<html><body><table width='100%'><tr><td><h1>Harbour</h1><p>Menu: Home Berths</p></td></tr>"
        "<tr><td><table><tr><td><h2>Berths</h2><p>Nine berths line the quay.</p></td></tr></table></td></tr>"
        "</table><table role='presentation'><tr><td>Contact the berth master.</td></tr></table>"
        "<table><tr><th>Crane</th><th>Lift</th></tr><tr><td><p>G1</p></td><td><p>40 t</p></td></tr></table>"
        "</body></html>"
    )
    (page,) = read(layout.encode())
    assert page.text.split("\n\n") == [
        "Harbour",
        "Menu: Home Berths",
        "Berths",
        "Nine berths line the quay.",
        "Contact the berth master.",
        "Crane | Lift\nG1 | 40 t",
    ]
    assert [page.text[b.start : b.end] for b in page.blocks if b.kind is BlockKind.HEADING] == ["Harbour", "Berths"]


def _saved(document: Any) -> bytes:
    """A python-docx Document or python-pptx Presentation as the bytes of its file."""
    import io

    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


#: A crane table (4 rows, 3 columns) with a merged header over two columns, a header cell over two
#: rows and a label row; python-docx and python-pptx tables fill and merge alike.
CRANE_CELLS = {
    (0, 0): "Crane",
    (0, 1): "Rating",
    (1, 1): "Lift",
    (1, 2): "Outreach",
    (2, 0): "G1",
    (2, 1): "40 t",
    (2, 2): "45 m",
    (3, 0): "Mobile cranes on request",
}
CRANE_ROWS = "Crane | Rating | Rating\nCrane | Lift | Outreach\nG1 | 40 t | 45 m\nMobile cranes on request"


def _fill_crane_table(table: Any) -> None:
    for (row, column), text in CRANE_CELLS.items():
        table.cell(row, column).text = text
    table.cell(0, 1).merge(table.cell(0, 2))  # "Rating" over two columns
    table.cell(0, 0).merge(table.cell(1, 0))  # "Crane" over two header rows
    table.cell(3, 0).merge(table.cell(3, 2))  # a label row


def test_merged_cells_of_a_word_table_stand_under_each_column_they_cover() -> None:
    import docx

    document = docx.Document()
    table = document.add_table(rows=4, cols=3)
    _fill_crane_table(table)
    # A table nested in a cell is read in it (python-docx's cell.text leaves it out).
    nested = table.cell(2, 2).add_table(rows=1, cols=2)
    nested.cell(0, 0).text, nested.cell(0, 1).text = "reach", "at 60°"
    (page,) = read(_saved(document))
    assert block_texts(page, BlockKind.TABLE) == [CRANE_ROWS.replace("45 m", "45 m reach at 60°")]


def test_merged_cells_of_a_slide_table_stand_under_each_column_they_cover() -> None:
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Cranes"
    _fill_crane_table(slide.shapes.add_table(4, 3, 0, 0, Inches(6), Inches(2)).table)
    (page,) = read(_saved(deck))
    assert block_texts(page, BlockKind.TABLE) == [CRANE_ROWS]


def test_a_slide_chart_is_its_title_and_its_data_as_a_table() -> None:

    import pptx
    from pptx.chart.data import CategoryChartData, XyChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Throughput"
    bars = CategoryChartData()
    bars.categories = ["2024", "2025"]
    bars.add_series("Containers", (410.0, 455.5))
    bars.add_series("Bulk", (120.0, None))
    frame = slide.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, 0, 0, Inches(4), Inches(3), bars)
    frame.chart.has_title = True
    frame.chart.chart_title.text_frame.text = "Tonnes handled per year"
    points = XyChartData()
    points.add_series("Draught against length").add_data_point(200, 14.5)
    slide.shapes.add_chart(XL_CHART_TYPE.XY_SCATTER, 0, 0, Inches(4), Inches(3), points)
    (page,) = read(_saved(deck))
    assert page.text.split("\n\n")[1:] == [
        "Chart: Tonnes handled per year",
        "| Containers | Bulk\n2024 | 410 | 120\n2025 | 455.5 |",  # a gap is an empty cell
        "Series | x | y\nDraught against length | 200 | 14.5",
    ]
    assert [block.kind for block in page.blocks][1:] == [BlockKind.PARAGRAPH, BlockKind.TABLE, BlockKind.TABLE]


def test_a_smart_art_graphic_is_read_in_its_diagram_order() -> None:
    # A SmartArt process as PowerPoint stores it: a graphic frame on the slide naming its data part,
    # whose nodes hold the text and whose connections give their order and levels.

    import pptx
    from pptx.opc.package import Part
    from pptx.opc.packuri import PackURI
    from pptx.oxml import parse_xml

    dgm = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
    a = "http://schemas.openxmlformats.org/drawingml/2006/main"

    def point(model: str, text: str, kind: str = "") -> str:
        kind_attribute = f' type="{kind}"' if kind else ""
        return (
            f'<dgm:pt modelId="{model}"{kind_attribute}><dgm:t><a:p><a:r><a:t>{text}</a:t></a:r></a:p></dgm:t></dgm:pt>'
        )

    def link(parent: str, child: str, order: int) -> str:
        return f'<dgm:cxn modelId="c{child}" srcId="{parent}" destId="{child}" srcOrd="{order}"/>'

    data = (
        f'<dgm:dataModel xmlns:dgm="{dgm}" xmlns:a="{a}"><dgm:ptLst>'
        + point("0", "", "doc")
        + point("3", "Inspect the hold")
        + point("1", "Berth the ship")
        + point("2", "Moor fore and aft")
        + point("9", "transition", "parTrans")
        + "</dgm:ptLst><dgm:cxnLst>"
        + link("0", "3", 1)
        + link("0", "1", 0)
        + link("1", "2", 0)
        + "</dgm:cxnLst></dgm:dataModel>"
    )
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Arrival"
    part = Part(
        PackURI("/ppt/diagrams/data1.xml"),
        "application/vnd.openxmlformats-officedocument.drawingml.diagramData+xml",
        deck.part.package,
        data.encode(),
    )
    relation = slide.part.relate_to(
        part, "http://schemas.openxmlformats.org/officeDocument/2006/relationships/diagramData"
    )
    slide.shapes._spTree.append(
        parse_xml(
            '<p:graphicFrame xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
            f' xmlns:a="{a}" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
            '<p:nvGraphicFramePr><p:cNvPr id="9" name="Diagram"/><p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr>'
            '<p:xfrm><a:off x="0" y="0"/><a:ext cx="100" cy="100"/></p:xfrm>'
            f'<a:graphic><a:graphicData uri="{dgm}"><dgm:relIds xmlns:dgm="{dgm}" r:dm="{relation}"/>'
            "</a:graphicData></a:graphic></p:graphicFrame>"
        )
    )
    (page,) = read(_saved(deck))
    assert page.text.split("\n\n") == ["Arrival", "Berth the ship\nMoor fore and aft\nInspect the hold"]


def test_html_cells_spanning_rows_or_columns_stand_under_each_column_they_cover() -> None:
    html = (
        "<html><body><table>"
        "<tr><th rowspan='2'>Kind</th><th rowspan='2'>Crane</th><th colspan='2'>Rating</th></tr>"
        "<tr><th>Lift</th><th>Outreach</th></tr>"
        "<tr><td rowspan='2'>Gantry</td><td>G1</td><td>40 t</td><td>45 m</td></tr>"
        "<tr><td>G2</td><td>65 t</td><td>52 m</td></tr>"
        "<tr><td colspan='4'>Mobile cranes</td></tr>"
        "<tr><td>Mobile</td><td>M1</td><td colspan='2' rowspan='0'>on request</td></tr>"
        "</table></body></html>"
    )
    (page,) = read(html.encode())
    assert block_texts(page, BlockKind.TABLE) == [
        "Kind | Crane | Rating | Rating\n"
        "Kind | Crane | Lift | Outreach\n"
        "Gantry | G1 | 40 t | 45 m\n"
        "Gantry | G2 | 65 t | 52 m\n"
        "Mobile cranes\n"  # a label across the table: once
        "Mobile | M1 | on request | on request"
    ]
    # DocBook's admonition: an icon cell spanning both rows fills no row, so it is no column.
    note = (
        "<table><tr><td rowspan='2'><img src='note.png'/></td><th>Note</th></tr><tr><td>Moor at dusk.</td></tr></table>"
    )
    (page,) = read(f"<html><body>{note}</body></html>".encode())
    assert block_texts(page, BlockKind.TABLE) == ["Note\nMoor at dusk."]
    # A hostile span (colspan 10^9, capped at HTML's 1,000) over many rows is read as written.
    hostile = "<table>" + "<tr><td colspan='1000000000'>x</td><td>y</td></tr>" * 300 + "</table>"
    (page,) = read(f"<html><body>{hostile}</body></html>".encode())
    assert block_texts(page, BlockKind.TABLE) == ["\n".join(["x | y"] * 300)]


def test_markdown_front_matter_is_metadata_its_title_the_documents() -> None:
    yaml = b'---\ntitle: "Harbour guide"\nauthor: Ann\ntags: [ports]\n---\n\nNine berths.\n\n## Berths\n\nBerth 7.\n'
    document = read_structured(yaml, DocumentFormat.MARKDOWN, LIMITS)
    assert document.title == "Harbour guide"
    assert document.pages[0].text == "Nine berths.\n\nBerths\n\nBerth 7."  # no heading made of the block
    toml = read_structured(b"+++\ntitle = 'Quay'\n+++\nBody.\n", DocumentFormat.MARKDOWN, LIMITS)
    assert (toml.title, toml.pages[0].text) == ("Quay", "Body.")
    # A thematic break that opens the text is not front matter: its text stays.
    ruled = read_structured(b"---\n\nOpening words.\n\n---\n\nMore.\n", DocumentFormat.MARKDOWN, LIMITS)
    assert (ruled.title, ruled.pages[0].text) == (None, "Opening words.\n\nMore.")


def test_html_blocks_in_markdown_are_read_as_html() -> None:
    # A README's habits: a centred paragraph, a <details> section, an HTML table, a comment, a logo.
    readme = (
        '# Tool\n\n<p align="center">A fast compressor.</p>\n\n<!-- a note to editors -->\n\n'
        "<details>\n<summary>Build notes</summary>\n\nRun make.\n\n</details>\n\n"
        "<table><tr><th>Level</th><th>Speed</th></tr><tr><td>1</td><td>500 MB/s</td></tr></table>\n\n"
        '<img src="logo.png">\n\n<script>track()</script>\n\nEnd.\n'
    )
    (page,) = read(readme.encode())
    assert page.text.split("\n\n") == [
        "Tool",
        "A fast compressor.",
        "Build notes",
        "Run make.",
        "Level | Speed\n1 | 500 MB/s",
        "End.",
    ]
    assert block_texts(page, BlockKind.TABLE) == ["Level | Speed\n1 | 500 MB/s"]


def test_a_word_paragraph_reads_its_runs_wherever_they_stand() -> None:
    # Tracked changes pending (an insertion shown, a deletion not), a smart tag, a simple field, an
    # inline content control, a tab and a non-breaking hyphen: Word shows all of them in the line.
    import docx
    from docx.oxml import parse_xml

    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    document = docx.Document()
    paragraph = document.add_paragraph("Berths:")
    for xml in (
        '<w:ins w:id="1" w:author="A"><w:r><w:t xml:space="preserve"> nine</w:t></w:r></w:ins>',
        '<w:del w:id="2" w:author="A"><w:r><w:delText> eight</w:delText></w:r></w:del>',
        '<w:smartTag w:uri="u" w:element="e"><w:r><w:t xml:space="preserve"> deep</w:t></w:r></w:smartTag>',
        '<w:fldSimple w:instr="PAGE"><w:r><w:t xml:space="preserve"> page 3</w:t></w:r></w:fldSimple>',
        "<w:sdt><w:sdtContent><w:r><w:tab/><w:t>north</w:t><w:noBreakHyphen/><w:t>east</w:t></w:r></w:sdtContent></w:sdt>",
    ):
        paragraph._p.append(parse_xml(xml.replace(">", f" {w}>", 1)))  # the namespace on the outer element
    (page,) = read(_saved(document))
    assert page.text == "Berths: nine deep page 3 north-east"


def test_word_text_boxes_are_read_once_after_their_paragraph() -> None:
    # A sidebar as Word writes it: a DrawingML text box, and its VML copy for older readers.

    import docx
    from docx.oxml import parse_xml

    sidebar = "Sidebar: berth seven is closed until March."
    box = f"<w:txbxContent><w:p><w:r><w:t>{sidebar}</w:t></w:r></w:p></w:txbxContent>"
    shape = parse_xml(
        '<w:r xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
        ' xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
        ' xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"'
        ' xmlns:v="urn:schemas-microsoft-com:vml"><mc:AlternateContent>'
        f'<mc:Choice Requires="wps"><w:drawing><wps:wsp><wps:txbx>{box}</wps:txbx></wps:wsp></w:drawing></mc:Choice>'
        f"<mc:Fallback><w:pict><v:shape><v:textbox>{box}</v:textbox></v:shape></w:pict></mc:Fallback>"
        "</mc:AlternateContent></w:r>"
    )
    document = docx.Document()
    anchor = document.add_paragraph("The quay has nine berths.")
    anchor._p.append(shape)
    document.add_paragraph("Cranes are rated below.")
    (page,) = read(_saved(document))
    assert page.text.split("\n\n") == ["The quay has nine berths.", sidebar, "Cranes are rated below."]


def test_word_footnotes_and_endnotes_follow_the_paragraph_that_refers_to_them() -> None:

    import docx
    from docx.opc.constants import CONTENT_TYPE, RELATIONSHIP_TYPE
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from docx.oxml import parse_xml

    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    document = docx.Document()
    for kind, content_type, relationship, text in (
        ("footnote", CONTENT_TYPE.WML_FOOTNOTES, RELATIONSHIP_TYPE.FOOTNOTES, "Dredged in 2019."),
        ("endnote", CONTENT_TYPE.WML_ENDNOTES, RELATIONSHIP_TYPE.ENDNOTES, "Harbour survey, 2021."),
    ):
        blob = (
            f'<w:{kind}s {w}><w:{kind} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:{kind}>'
            f'<w:{kind} w:id="7"><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:{kind}></w:{kind}s>'
        ).encode()
        part = Part(PackURI(f"/word/{kind}s.xml"), content_type, blob, document.part.package)
        document.part.relate_to(part, relationship)
    quay = document.add_paragraph("The quay is fourteen metres deep.")
    quay._p.append(parse_xml(f'<w:r {w}><w:footnoteReference w:id="7"/></w:r>'))
    quay._p.append(parse_xml(f'<w:r {w}><w:endnoteReference w:id="7"/></w:r>'))
    document.add_paragraph("Cranes are rated below.")
    (page,) = read(_saved(document))
    assert page.text.split("\n\n") == [
        "The quay is fourteen metres deep.",
        "Footnote 1: Dredged in 2019.",
        "Endnote 1: Harbour survey, 2021.",
        "Cranes are rated below.",
    ]


def test_bytes_that_decode_in_no_encoding_are_a_code() -> None:
    with pytest.raises(PermanentError) as caught:
        read(documents.undecodable_text())
    assert caught.value.code is ErrorCode.UNKNOWN_ENCODING


def test_blocks_index_their_page_text_exactly() -> None:
    for make in (documents.docx_bytes, documents.pptx_bytes):
        for page in read(make()):
            assert page.text == "\n\n".join(page.text[b.start : b.end] for b in page.blocks)


# -- hostile inputs: each a permanent code in seconds ---------------------------------------------
HOSTILE: dict[str, tuple[Callable[[], bytes], ErrorCode]] = {
    "zip-bomb-docx": (documents.zip_bomb_docx, ErrorCode.DOCUMENT_TOO_COMPLEX),
    # Under the declared total (512 MB): the streaming read stops the part at its own bound (128 MB).
    "zip-bomb-one-part-docx": (lambda: documents.zip_bomb_docx(300 * 1024 * 1024), ErrorCode.DOCUMENT_TOO_COMPLEX),
    "entity-expansion-docx": (documents.entity_expansion_docx, ErrorCode.UNSAFE_XML),
    "external-entity-docx": (documents.external_entity_docx, ErrorCode.UNSAFE_XML),
    "10000-slides-pptx": (documents.many_slides_pptx, ErrorCode.TOO_MANY_PAGES),
    "100000-nested-html": (documents.deeply_nested_html, ErrorCode.DOCUMENT_TOO_COMPLEX),
    "10mb-line-markdown": (documents.one_line_markdown, ErrorCode.DOCUMENT_TOO_COMPLEX),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_documents_end_with_a_permanent_code_in_seconds(name: str) -> None:
    make, code = HOSTILE[name]
    data = make()
    started = time.monotonic()
    with pytest.raises(PermanentError) as caught:
        read_structured(data, detect(data), LIMITS)
    elapsed = time.monotonic() - started
    assert caught.value.code is code, caught.value
    assert elapsed < SECONDS, f"{name}: {elapsed:.1f} s"


def test_the_10000_slide_deck_is_a_real_presentation_under_the_limit() -> None:
    """The hostile deck is refused by the page limit, not because it is broken: with the limit above
    its size it opens and reads."""
    deck = documents.many_slides_pptx(slides=40)
    pages = read_structured(deck, DocumentFormat.PPTX, FormatLimits(max_pages=50)).pages
    assert len(pages) == 40 and all(page.blocks[0].anchor == f"slide-{page.page_number}" for page in pages)


def test_a_pdf_after_junk_is_a_pdf() -> None:
    pdf = open(SAMPLES_PDF, "rb").read()  # noqa: SIM115
    assert detect(b"From: scanner@example.org\nSubject: report\n\n" + pdf) is DocumentFormat.PDF
    assert detect(b"\x00\x01\x02" * 100 + pdf) is DocumentFormat.PDF


def test_word_text_inside_content_controls_is_read() -> None:
    """Word wraps cover pages and form fields in content controls (w:sdt): their paragraphs count."""
    import io
    import zipfile

    source = documents.docx_bytes()
    xml = zipfile.ZipFile(io.BytesIO(source)).read("word/document.xml")
    cover = (
        b"<w:sdt><w:sdtPr/><w:sdtContent><w:p><w:r><w:t>Prepared for the Port Ellery harbour board.</w:t></w:r></w:p>"
        b"</w:sdtContent></w:sdt>"
    )
    body = xml.index(b"<w:body>") + len(b"<w:body>")
    wrapped = documents._replace_part(source, "word/document.xml", xml[:body] + cover + xml[body:])
    (page,) = read(wrapped)
    assert page.text.startswith("Prepared for the Port Ellery harbour board.")
    assert "Vessels longer than 200 metres" in page.text and "G1 | 40 tonnes | 45 m" in page.text
