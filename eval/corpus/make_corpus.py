"""Rebuild the evaluation corpus from Debian packages (needs apt-get and a Debian mirror).

    .venv/bin/python -m eval.corpus.make_corpus [--work-dir DIR]

Downloads the packages named in ``SOURCES`` with ``apt-get download``, extracts them with
``dpkg-deb -x``, copies each PDF, trimming the long ones to their first pages with pypdf (the
copyright and permission notice of each trimmed manual is on a page that is kept). Each file
taken from a package is checked against the sha256 recorded in ``SOURCES`` first, so a newer
package version fails loudly. README.md beside this file gives the versions and licences.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pypdf import PdfReader, PdfWriter

CORPUS_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Source:
    name: str  # file name in the corpus
    package: str  # Debian package
    version: str
    path: str  # inside the package
    sha256: str  # of the file in the package
    pages: int | None = None  # keep only the first N pages (None: the whole file, unchanged)


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
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def trim(source: Path, target: Path, pages: int) -> None:
    writer = PdfWriter()
    writer.append(PdfReader(source), pages=(0, pages))
    writer.add_metadata({"/Subject": f"First {pages} pages of {source.name} (rag-ingest evaluation corpus)"})
    with target.open("wb") as output:
        writer.write(output)


def build(work_dir: Path) -> None:
    packages = sorted({f"{s.package}={s.version}" for s in SOURCES})
    subprocess.run(["apt-get", "download", *packages], cwd=work_dir, check=True)
    extracted = work_dir / "root"
    for deb in sorted(work_dir.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(extracted)], check=True)
    for source in SOURCES:
        original = extracted / source.path
        if sha256(original) != source.sha256:
            raise SystemExit(f"{source.path} in {source.package}: sha256 {sha256(original)}, expected {source.sha256}")
        target = CORPUS_DIR / source.name
        if source.pages is None:
            shutil.copyfile(original, target)
        else:
            trim(original, target, source.pages)
        pages = len(PdfReader(target).pages)
        print(f"{source.name}: {pages} pages, {target.stat().st_size} bytes, sha256 {sha256(target)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=Path, help="where to download and extract (default: a temporary dir)")
    args = parser.parse_args()
    if args.work_dir:
        args.work_dir.mkdir(parents=True, exist_ok=True)
        build(args.work_dir)
    else:
        with tempfile.TemporaryDirectory() as work_dir:
            build(Path(work_dir))


if __name__ == "__main__":
    main()
