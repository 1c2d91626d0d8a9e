// The embedded PDF viewer: a PDF hit's pages drawn by PDF.js (npm's pdfjs-dist, served as it ships from
// vendor/pdfjs/ with its licence, no build step; loaded the first time a PDF hit is opened), with the
// passage's rectangles (POST /search's `boxes`: fractions of the displayed page, origin top-left)
// laid over its words, and PDF.js's text layer so the text can be selected and found.

import { el } from "./format.js";

const PDFJS_URL = new URL("./vendor/pdfjs/pdf.min.mjs", import.meta.url).href;
const WORKER_URL = new URL("./vendor/pdfjs/pdf.worker.min.mjs", import.meta.url).href;
const STYLES_URL = new URL("./pdf-view.css", import.meta.url).href;
/** A passage over more pages than this shows its first ones (chunks span one or two pages). */
const MAX_PAGES = 3;

let pdfjsLoading = null;
function loadPdfjs() {
  if (!document.querySelector(`link[href="${STYLES_URL}"]`)) {
    document.head.append(el("link", { rel: "stylesheet", href: STYLES_URL }));
  }
  pdfjsLoading ??= import(PDFJS_URL).then((pdfjs) => {
    pdfjs.GlobalWorkerOptions.workerSrc = WORKER_URL;
    return pdfjs;
  });
  return pdfjsLoading;
}

/** The pages a passage covers, first to last (at most MAX_PAGES). */
export function passagePages(passage) {
  const first = Number(passage.page_start) || 1;
  const last = Math.max(first, Number(passage.page_end) || first);
  return Array.from({ length: Math.min(last - first + 1, MAX_PAGES) }, (_, index) => first + index);
}

/** A box as CSS percentages of its page (set through the CSSOM: the page's CSP has no inline styles). */
export function boxStyle(box) {
  const pct = (value) => `${(Math.min(Math.max(value, 0), 1) * 100).toFixed(3)}%`;
  return { left: pct(box.x0), top: pct(box.y0), width: pct(box.x1 - box.x0), height: pct(box.y1 - box.y0) };
}

export class PdfViewer {
  constructor({ api, dialog, openOriginal }) {
    this.api = api;
    this.dialog = dialog;
    this.document = null; // {id, pdf} of the last PDF loaded: reopening a hit of it fetches nothing
    this.shown = null; // {documentId, pages, boxes} of the last view, for the tests
    this.passage = null;
    this.original = dialog.querySelector("#viewer-original");
    this.original.addEventListener("click", () => this.passage && openOriginal(this.passage));
    dialog.querySelector("#viewer-close").addEventListener("click", () => dialog.close());
  }

  async pdfOf(documentId) {
    if (this.document?.id === documentId) return this.document.pdf;
    const pdfjs = await loadPdfjs();
    const { url } = await this.api.download(documentId);
    const answer = await fetch(url);
    if (!answer.ok) throw new Error(`the download answered ${answer.status}`);
    const data = new Uint8Array(await answer.arrayBuffer());
    // verbosity 0: errors only (a font PDF.js substitutes is not the reader's concern).
    const pdf = await pdfjs.getDocument({ data, verbosity: 0 }).promise;
    await this.document?.pdf.destroy();
    this.document = { id: documentId, pdf };
    return pdf;
  }

  /** Show the passage's pages with its rectangles, scrolled to the first one. */
  async show(passage, filename) {
    this.passage = passage;
    const body = this.dialog.querySelector("#viewer-content");
    this.dialog.querySelector("#viewer-title").textContent = filename || passage.document_id;
    this.original.hidden = false;
    body.replaceChildren(el("p", { className: "muted" }, "Loading the PDF…"));
    if (!this.dialog.open) this.dialog.showModal();
    const pdfjs = await loadPdfjs();
    const pdf = await this.pdfOf(passage.document_id);
    const width = Math.max(body.clientWidth - 4, 200);
    const sheets = [];
    for (const number of passagePages(passage).filter((page) => page <= pdf.numPages)) {
      sheets.push(await this.renderPage(pdfjs, pdf, number, width, passage.boxes || []));
    }
    body.replaceChildren(...sheets);
    const first = body.querySelector(".pdf-passage");
    (first || sheets[0])?.scrollIntoView({ block: "center" });
    this.shown = {
      documentId: passage.document_id,
      text: passage.text,
      pages: sheets.map((sheet) => Number(sheet.dataset.page)),
      boxes: body.querySelectorAll(".pdf-passage").length,
    };
    return this.shown;
  }

  async renderPage(pdfjs, pdf, number, width, boxes) {
    const page = await pdf.getPage(number);
    const viewport = page.getViewport({ scale: width / page.getViewport({ scale: 1 }).width });
    const ratio = window.devicePixelRatio || 1;
    const canvas = el("canvas", { className: "pdf-canvas" });
    canvas.width = Math.floor(viewport.width * ratio);
    canvas.height = Math.floor(viewport.height * ratio);
    const text = el("div", { className: "textLayer" });
    const marks = boxes
      .filter((box) => box.page === number)
      .map((box) => {
        const mark = el("div", { className: "pdf-passage" });
        Object.assign(mark.style, boxStyle(box));
        return mark;
      });
    const sheet = el(
      "section",
      { className: "pdf-page", dataset: { page: number }, "aria-label": `Page ${number}` },
      canvas,
      el("div", { className: "pdf-marks" }, ...marks),
      text,
    );
    sheet.style.width = `${viewport.width}px`;
    sheet.style.height = `${viewport.height}px`;
    sheet.style.setProperty("--total-scale-factor", String(viewport.scale));
    sheet.style.setProperty("--scale-factor", String(viewport.scale));
    await page.render({ canvas, viewport, transform: ratio === 1 ? null : [ratio, 0, 0, ratio, 0, 0] }).promise;
    await new pdfjs.TextLayer({ textContentSource: page.streamTextContent(), container: text, viewport }).render();
    return sheet;
  }
}
