"""Rebuild the formats corpus (DOCX, PPTX, HTML, XLSX, CSV) from Debian packages.

    .venv/bin/python -m eval.formats.make_formats [--work-dir DIR]

Fetches the packages named in ``SOURCES`` (``apt-get download``, ``dpkg-deb -x``), checks each file
taken against the sha256 recorded here, uses HTML manuals and spreadsheets as shipped, and converts
packaged Markdown and HTML manuals to DOCX and PPTX with Debian's pandoc (``CONVERTER_VERSION``;
needed only here, never by ``make eval`` or the tests), the pictures an HTML page shows embedded
where ``pictures`` says so. Imports ``eval.corpus.make_corpus``. README.md beside this file: versions,
licences, the why.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from eval.corpus.make_corpus import fetch_debian, run_build, sha256

FORMATS_DIR = Path(__file__).resolve().parent
#: The converter the DOCX and PPTX files were made with (Debian 12's pandoc package).
CONVERTER_VERSION = "2.17.1.1"
#: Fixed timestamps in the converted files' metadata, so a rebuild gives the same document.
SOURCE_DATE_EPOCH = "1672531200"  # 2023-01-01T00:00:00Z


@dataclass(frozen=True)
class Source:
    name: str  # file name in this corpus
    package: str  # Debian package
    version: str
    path: str  # inside the package
    sha256: str  # of the file as shipped (the .gz where it is compressed)
    #: "copy": the file as shipped; "docx"/"pptx": converted by pandoc from ``reader``'s format.
    make: Literal["copy", "docx", "pptx"] = "copy"
    reader: Literal["markdown", "html"] = "markdown"
    #: Embed the pictures the HTML shows (pandoc's ``--resource-path``: the page's folder in the package).
    pictures: bool = False


SOURCES = (
    # HTML, as shipped.
    Source(
        "r-data-import-export.html",
        "r-doc-html",
        "4.2.2.20221110-2",
        "usr/share/R/doc/manual/R-data.html",
        "0d3d4c4befc6e4b30701ec358f7da73487a6eb520b9b768145dcaf72db27a39f",
    ),
    Source(
        "sphinx-rst-basics.html",
        "sphinx-doc",
        "5.3.0-4",
        "usr/share/doc/sphinx-doc/html/usage/restructuredtext/basics.html",
        "9883755aebf69004f9efa0916f76229c191c64aa68e3b3e99de2436826761840",
    ),
    Source(
        "debian-reference-auth.html",
        "debian-reference-en",
        "2.100",
        "usr/share/debian-reference/ch04.en.html",
        "fee37e8caeeb3df571d6a469d56c7d493ca1e63ebb014adc2506f01ded356c74",
    ),
    Source(
        "lynx-users-guide.html",
        "lynx-common",
        "2.9.0dev.12-1",
        "usr/share/doc/lynx-common/lynx_help/Lynx_users_guide.html.gz",
        "6190b19756127d4a6edbc0bfbb4911a496bb2df58926e3517f2a42b7094b27a0",
    ),
    # DOCX, converted by pandoc.
    Source(
        "systemd-uids-gids.docx",
        "systemd",
        "252.39-1~deb12u2",
        "usr/share/doc/systemd/UIDS-GIDS.md.gz",
        "686e735116bc50e0997a8825437b643b552c05537da317236c3f05e75fe2c4de",
        make="docx",
    ),
    Source(
        "systemd-environment.docx",
        "systemd",
        "252.39-1~deb12u2",
        "usr/share/doc/systemd/ENVIRONMENT.md.gz",
        "f4cf1771a1cbd74bc442e21ba72ed0822e72adeb80eefba5d75321957c3c0457",
        make="docx",
    ),
    Source(
        "zstd-readme.docx",
        "zstd",
        "1.5.4+dfsg2-5+deb12u1",
        "usr/share/doc/zstd/README.md.gz",
        "83931b652049a3a6cfa9df297cb1027b35ef1137532433b9de56827e4ae2e9c5",
        make="docx",
    ),
    Source(
        "debian-reference-i18n.docx",
        "debian-reference-en",
        "2.100",
        "usr/share/debian-reference/ch08.en.html",
        "c0ee6f9782d9e559d349a445341cb8a612a2e07f63e0987bf18c6748ef1cfe40",
        make="docx",
        reader="html",
    ),
    # Figures: the Debian Administrator's Handbook's chapters with screenshots and diagrams.
    Source(
        "debian-handbook-apt-frontends.html",
        "debian-handbook",
        "11.20220922",
        "usr/share/doc/debian-handbook/html/en-US/sect.apt-frontends.html",
        "15e75db0adfb2c483b34f0ee81fa56e7fc6672a9856e029a56f02b9713cf3559",
    ),
    Source(
        "debian-handbook-desktop-tools.html",
        "debian-handbook",
        "11.20220922",
        "usr/share/doc/debian-handbook/html/en-US/sect.main-desktop-tools.html",
        "0b12f86bc7292eaa353d828da4cf5bda27f3a2d5a4f432d0649042348625a405",
    ),
    Source(
        "debian-handbook-installation.docx",
        "debian-handbook",
        "11.20220922",
        "usr/share/doc/debian-handbook/html/en-US/sect.installation-steps.html",
        "ff7800d42fa2132cfe8989df821e5ac75a5563a57a90b5f2c95351356f78f4d5",
        make="docx",
        reader="html",
        pictures=True,
    ),
    Source(
        "debian-handbook-release-lifecycle.docx",
        "debian-handbook",
        "11.20220922",
        "usr/share/doc/debian-handbook/html/en-US/sect.release-lifecycle.html",
        "6105693f4c714280af396d739c4fe38bd4cc7c320c676c7e33c558ca36f2a63f",
        make="docx",
        reader="html",
        pictures=True,
    ),
    Source(
        "debian-handbook-desktops.pptx",
        "debian-handbook",
        "11.20220922",
        "usr/share/doc/debian-handbook/html/en-US/sect.graphical-desktops.html",
        "9c6f73a3401a683f44c028c66ebde0b4518d76f7942955e6aff691d18a9e8bb4",
        make="pptx",
        reader="html",
        pictures=True,
    ),
    Source(
        "debian-handbook-unix-services.pptx",
        "debian-handbook",
        "11.20220922",
        "usr/share/doc/debian-handbook/html/en-US/unix-services.html",
        "7fbcb24735365c94dc706443fa5cc6120576ac098f274d6bf874277071db2a60",
        make="pptx",
        reader="html",
        pictures=True,
    ),
    # PPTX, converted by pandoc (a slide per second-level heading).
    Source(
        "systemd-coding-style.pptx",
        "systemd",
        "252.39-1~deb12u2",
        "usr/share/doc/systemd/CODING_STYLE.md.gz",
        "d7acb955ddef97de0cca1e4cdba331fb1941df55084b189ce09c2fcb6f088f8e",
        make="pptx",
    ),
    Source(
        "systemd-hacking.pptx",
        "systemd",
        "252.39-1~deb12u2",
        "usr/share/doc/systemd/HACKING.md.gz",
        "83051de26992a06cc3d16e5ac2db886f136735b431bfce8d1eda8a9b95053e85",
        make="pptx",
    ),
    Source(
        "zstd-contributing.pptx",
        "zstd",
        "1.5.4+dfsg2-5+deb12u1",
        "usr/share/doc/zstd/CONTRIBUTING.md.gz",
        "8249de4e461a446bc605fd5b4715389121df293581ac5b2ef6d0a51692daabda",
        make="pptx",
    ),
    Source(
        "apt-readme.pptx",
        "apt",
        "2.6.2",
        "usr/share/doc/apt/README.md.gz",
        "4e4814a5488b9bbbe71e9783e28c700ce3b6a4d713e991e05d7ee4cd8e73e2e1",
        make="pptx",
    ),
    # Spreadsheets, as shipped (real files: R packages' example data, distro-info-data's tables).
    Source(
        "readxl-deaths.xlsx",
        "r-cran-readxl",
        "1.4.2-1",
        "usr/lib/R/site-library/readxl/extdata/deaths.xlsx",
        "0469b75be78da0ca9b956d81e2338f32fa3f45b00622cef5e6d7a278897eb80a",
    ),
    Source(
        "openxlsx-pivot-tables.xlsx",
        "r-cran-openxlsx",
        "4.2.5.2-1",
        "usr/lib/R/site-library/openxlsx/extdata/loadPivotTables.xlsx",
        "fef9e207ef73200aa4506c2aab26df6b59c7e899e597389733b6f361f1064fab",
    ),
    Source(
        "distro-info-debian.csv",
        "distro-info-data",
        "0.58+deb12u7",
        "usr/share/distro-info/debian.csv",
        "f52f5cc3f8047accbe03d28865436d7b1a2b2dec017f51c3ee5ad2017295e0ec",
    ),
    Source(
        "distro-info-ubuntu.csv",
        "distro-info-data",
        "0.58+deb12u7",
        "usr/share/distro-info/ubuntu.csv",
        "226437d59f8c88b3bb630a6868255c33d3b7435ad198a5223f40fd5a5538be82",
    ),
    Source(
        "palmerpenguins-raw.csv",
        "r-cran-palmerpenguins",
        "0.1.1-1",
        "usr/lib/R/site-library/palmerpenguins/extdata/penguins_raw.csv",
        "144f623143c9360fd77322a4f86acb06dc198814dbd2669724c63e6457b907bd",
    ),
)


def check_converter() -> None:
    if shutil.which("pandoc") is None:
        raise SystemExit("pandoc not found: apt-get install pandoc (only needed to rebuild this corpus)")
    first_line = subprocess.run(["pandoc", "--version"], capture_output=True, text=True, check=True).stdout
    version = first_line.split()[1]
    if version != CONVERTER_VERSION:
        raise SystemExit(f"pandoc {version} found, the corpus was made with {CONVERTER_VERSION}")


#: A DocBook figure in pandoc's Markdown: the picture, then its title line in bold.
_FIGURE_TITLE = re.compile(r"!\[[^\]]*\]\(([^)]+)\)\s*\n\s*\n\*\*(Figure\s[^*]+)\*\*")
#: Markdown without pandoc's div and span syntax: its PowerPoint writer drops a picture inside a div.
_PLAIN_MARKDOWN = (
    "markdown-fenced_divs-native_divs-native_spans-raw_html-bracketed_spans-header_attributes-link_attributes"
)


def convert(original: Path, target: Path, source: Source) -> None:
    env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    command = ["pandoc", "--from", source.reader, "--to", source.make, "--output", str(target)]
    if source.make == "pptx":
        command.append("--slide-level=2")
    if source.pictures:
        command.append(f"--resource-path={original.parent}")
    if source.make == "pptx" and source.reader == "html":
        # HTML to PowerPoint goes through Markdown, each figure's title made its picture's caption (a
        # slide holds the picture and its caption; the title line would stand on the next slide).
        markdown = subprocess.run(
            ["pandoc", "--from", "html", "--to", _PLAIN_MARKDOWN, str(original)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        captioned = _FIGURE_TITLE.sub(lambda m: f"![{' '.join(m.group(2).split())}]({m.group(1)})", markdown)
        command[2] = "markdown"
        subprocess.run(command, input=captioned, text=True, check=True, env=env)
        return
    subprocess.run([*command, str(original)], check=True, env=env)


def build(work_dir: Path) -> None:
    if any(source.make != "copy" for source in SOURCES):
        check_converter()
    extracted = work_dir / "root"
    fetch_debian(SOURCES, work_dir, extracted)
    for source in SOURCES:
        shipped = (extracted / source.path).resolve()
        if sha256(shipped) != source.sha256:
            raise SystemExit(f"{source.path} in {source.package}: sha256 {sha256(shipped)}, expected {source.sha256}")
        original = shipped
        if shipped.suffix == ".gz":  # Debian compresses large documentation files
            original = work_dir / "gunzipped" / shipped.name.removesuffix(".gz")
            original.parent.mkdir(exist_ok=True)
            original.write_bytes(gzip.decompress(shipped.read_bytes()))
        target = FORMATS_DIR / source.name
        if source.make == "copy":
            shutil.copyfile(original, target)
        else:
            convert(original, target, source)
        print(f"{source.name}: {target.stat().st_size} bytes, sha256 {sha256(target)}")


if __name__ == "__main__":
    run_build(build, __doc__)
