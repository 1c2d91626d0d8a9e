"""The formats corpus's image documents: pages of the PDF corpus (real documents) rendered as a
scanner would save them, a PNG, a JPEG and a two-page TIFF.

    .venv/bin/python -m eval.formats.make_images

Each page is rendered by pdfium at 150 dpi in greyscale and saved with Pillow (needed only here,
never by ``make eval`` or the tests, which read the committed files). README.md beside this file
says which pages, and their licences (those of the PDFs, eval/corpus/README.md).
"""

from __future__ import annotations

from pathlib import Path

import pypdfium2 as pdfium
from PIL import Image

FORMATS_DIR = Path(__file__).resolve().parent
CORPUS_DIR = FORMATS_DIR.parent / "corpus"
DPI = 150
#: file -> (source PDF in eval/corpus, its 1-based pages).
IMAGES: dict[str, tuple[str, tuple[int, ...]]] = {
    "mnras-guide-page4.png": ("mnras-guide.pdf", (4,)),
    "latex-usrguide-page2.jpg": ("latex-usrguide.pdf", (2,)),
    "jacow-a4-pages1-2.tiff": ("jacow-a4.pdf", (1, 2)),
}


def rendered(pdf: Path, numbers: tuple[int, ...]) -> list[Image.Image]:
    document = pdfium.PdfDocument(pdf.read_bytes())
    try:
        return [document[number - 1].render(scale=DPI / 72, grayscale=True).to_pil() for number in numbers]
    finally:
        document.close()


def main() -> None:
    for name, (source, numbers) in IMAGES.items():
        first, *rest = rendered(CORPUS_DIR / source, numbers)
        target = FORMATS_DIR / name
        if name.endswith(".tiff"):
            first.save(
                target, format="TIFF", save_all=True, append_images=rest, compression="tiff_deflate", dpi=(DPI, DPI)
            )
        elif name.endswith(".jpg"):
            first.save(target, format="JPEG", quality=85, dpi=(DPI, DPI))
        else:
            first.save(target, format="PNG", dpi=(DPI, DPI))
        print(f"{target.name}: {target.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
