// Search: passages, opened where they stand (pdf-view.js, image-view.js, the rendered view).
// Ask: the answer above the same search; its [n] open the cited spots.

import { decodeEntities, el } from "./format.js";

const EM_TAG = /<(\/?)em>/gi;

/** A highlight fragment as DOM nodes: <em> kept, any other markup shown as text. */
export function highlightFragment(html) {
  const fragment = document.createDocumentFragment();
  let target = fragment;
  let last = 0;
  for (const match of String(html).matchAll(EM_TAG)) {
    const text = html.slice(last, match.index);
    if (text) target.append(document.createTextNode(decodeEntities(text)));
    last = match.index + match[0].length;
    if (match[1] === "/") {
      if (target !== fragment) target = fragment;
    } else if (target === fragment) {
      target = document.createElement("em");
      fragment.append(target);
    }
  }
  const rest = String(html).slice(last);
  if (rest) target.append(document.createTextNode(decodeEntities(rest)));
  return fragment;
}

/** A passage's text as blocks: two or more lines of " | " cells (a table, first row the header), or text. */
export function passageBlocks(text) {
  const blocks = [];
  for (const line of String(text).split("\n")) {
    const cells = line.includes(" | ") ? line.split(" | ").map((cell) => cell.trim()) : null;
    const last = blocks[blocks.length - 1];
    if (cells && last?.kind === "rows") last.rows.push(cells);
    else if (cells) blocks.push({ kind: "rows", rows: [cells] });
    else if (line.trim()) blocks.push({ kind: "text", text: line });
  }
  // One line of cells is not a table: it stays text.
  return blocks.map((block) => (block.kind === "rows" && block.rows.length < 2 ? { kind: "text", text: block.rows[0].join(" | ") } : block))
    .map((block) => (block.kind === "rows" ? { kind: "table", rows: block.rows } : block));
}

/** The words a search's highlight fragments marked (<em>), lower-cased. */
function emphasisedWords(highlights) {
  const words = new Set();
  for (const fragment of highlights || []) {
    for (const match of String(fragment).matchAll(/<em>(.*?)<\/em>/gi)) words.add(decodeEntities(match[1]).toLowerCase());
  }
  return words;
}

/** ``text`` as text nodes, ``words`` in <em> (never parsed as HTML). */
function markedText(text, words) {
  const fragment = document.createDocumentFragment();
  for (const part of String(text).split(/([\p{L}\p{N}]+)/u)) {
    if (!part) continue;
    fragment.append(words.has(part.toLowerCase()) ? el("em", {}, part) : part);
  }
  return fragment;
}

/** A passage holding a table, whole: lines as text, tables as tables, the search's words marked. */
function structuredPassage(blocks, highlights) {
  const words = emphasisedWords(highlights);
  const body = el("div", { className: "passage" });
  for (const block of blocks) {
    if (block.kind === "text") {
      body.append(el("p", {}, markedText(block.text, words)));
      continue;
    }
    const [head, ...rows] = block.rows;
    body.append(
      el(
        "table",
        { className: "passage-table" },
        el("thead", {}, el("tr", {}, ...head.map((cell) => el("th", { scope: "col" }, markedText(cell, words))))),
        el("tbody", {}, ...rows.map((row) => el("tr", {}, ...row.map((cell) => el("td", {}, markedText(cell, words)))))),
      ),
    );
  }
  return body;
}

const IMAGES = new Set(["png", "jpeg", "tiff"]);

export function pageSpan(passage) {
  const { page_start: start, page_end: end, document_format: format } = passage;
  if (passage.cell_range) return passage.cell_range;
  if (format === "pptx") return end && end !== start ? `slides ${start}–${end}` : `slide ${start}`;
  if (format && format !== "pdf" && !IMAGES.has(format)) {
    return passage.paragraph_index ? `paragraph ${passage.paragraph_index}` : "section";
  }
  if (!Number.isFinite(start)) return "";
  return end && end !== start ? `pages ${start}–${end}` : `page ${start}`;
}

export class SearchView {
  constructor({ api, elements, onError, filters = null, viewerDialog = null, send = () => false }) {
    this.api = api;
    this.send = send; // the live channel's: answers stream over it
    this.streams = new Map(); // request id -> its answer's handler
    this.answers = { streamed: 0, deltas: 0, posted: 0 };
    this.viewerDialog = viewerDialog;
    this.viewer = null; // viewer.js, loaded the first time a non-PDF hit is opened (not on first load)
    this.pdfViewer = null; // pdf-view.js and PDF.js, loaded the first time a PDF hit is opened
    this.elements = elements;
    this.onError = onError;
    this.filters = filters;
    this.searches = 0;
    elements.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.run({ ask: event.submitter?.value === "ask" });
    });
  }

  reset() {
    this.elements.results.replaceChildren();
    this.clearAnswer();
    this.elements.status.textContent = "";
    this.filters?.clear();
  }

  async run({ ask = false } = {}) {
    const { query, mode, status, results, form } = this.elements;
    const text = query.value.trim();
    if (!text) return;
    const buttons = [...form.querySelectorAll("button[type=submit]")];
    buttons.forEach((button) => { button.disabled = true; });
    status.textContent = "Searching…";
    const filter = this.filters?.filter() ?? null;
    this.clearAnswer();
    const answering = ask ? this.showAnswer(text, mode.value, filter) : null;
    const filtered = filter ? `, ${this.filters.conditions.length} filter${this.filters.conditions.length === 1 ? "" : "s"}` : "";
    try {
      const answer = await this.api.search(text, mode.value, 5, filter);
      this.filters?.showError("");
      const passages = answer.passages || [];
      results.replaceChildren(...passages.map((passage) => this.renderPassage(passage)));
      status.textContent = passages.length
        ? `${passages.length} passage${passages.length === 1 ? "" : "s"} for “${text}” (${mode.selectedOptions[0].textContent}${filtered}).`
        : `Nothing found for “${text}”${filtered ? " with these filters" : ""}.`;
    } catch (error) {
      results.replaceChildren();
      status.textContent = this.filters?.showApiError(error) ? "Search failed: the filter was refused (see above)." : `Search failed: ${error.message}`;
    } finally {
      await answering;
      this.searches += 1;
      buttons.forEach((button) => { button.disabled = false; });
    }
  }

  clearAnswer() {
    const box = this.elements.answer;
    if (!box) return;
    box.replaceChildren();
    box.hidden = true;
    box.removeAttribute("aria-busy");
  }

  answerEvent(event) {
    this.streams.get(event.request_id)?.(event);
  }

  /** The answer box: answer.js, loaded on the first Ask. */
  async showAnswer(query, mode, filter) {
    return (await import("./answer.js")).showAnswer(this, query, mode, filter, pageSpan);
  }

  renderPassage(passage) {
    const blocks = passageBlocks(passage.text || "");
      const body = blocks.some((block) => block.kind === "table")
      ? structuredPassage(blocks, passage.highlights)
      : this.highlightedPassage(passage);
    const span = pageSpan(passage);
    const open = el("button", {
      type: "button",
      className: "link open-document",
      textContent: `${passage.filename || passage.document_id}, ${span}`,
      "aria-label": `Open ${passage.filename || "the document"} at ${span}`,
      onclick: () => this.open(passage),
    });
    const heading = (passage.heading_path || []).join(" › ");
    const copies = passage.copies || [];
    return el(
      "li",
      { className: "result", dataset: { documentId: passage.document_id, pageStart: passage.page_start ?? "" } },
      el("div", { className: "result-head" }, open, el("span", { className: "muted score" }, `score ${Number(passage.score).toFixed(3)}`)),
      heading ? el("div", { className: "muted heading-path" }, heading) : null,
      body,
      copies.length
        ? el("div", { className: "muted copies" }, `Same text also in: ${copies.map((copy) => `${copy.filename || copy.document_id}, ${pageSpan(copy)}`).join("; ")}`)
        : null,
    );
  }

  highlightedPassage(passage) {
    const body = el("p", { className: "passage" });
    if (passage.highlights && passage.highlights.length) {
      passage.highlights.forEach((fragment, index) => {
        if (index) body.append(" … ");
        body.append(highlightFragment(fragment));
      });
    } else {
      const text = passage.text || "";
      body.append(text.length > 320 ? `${text.slice(0, 320)}…` : text);
    }
    return body;
  }

  /** Open a hit where it stands: its page and rectangles, or its section and paragraph. */
  async open(passage) {
    if (!this.viewerDialog) return this.openOriginal(passage);
    const original = this.viewerDialog.querySelector("#viewer-original");
    try {
      if (IMAGES.has(passage.document_format)) return await (await import("./image-view.js")).showImage(this, passage);
      if (passage.document_format && passage.document_format !== "pdf") {
        if (original) original.hidden = true;
        if (!this.viewer) {
          const { DocumentViewer } = await import("./viewer.js");
          this.viewer = new DocumentViewer({ api: this.api, dialog: this.viewerDialog });
        }
        const shown = await this.viewer.show(passage);
        this.lastOpened = `view:${shown.documentId}#${shown.target || ""}`;
        return;
      }
      if (!this.pdfViewer) {
        const { PdfViewer } = await import("./pdf-view.js");
        this.pdfViewer = new PdfViewer({
          api: this.api,
          dialog: this.viewerDialog,
          openOriginal: (hit) => this.openOriginal(hit),
        });
      }
      const shown = await this.pdfViewer.show(passage, passage.filename);
      this.lastOpened = `pdf:${shown.documentId}#page=${shown.pages[0] ?? ""}`;
    } catch (error) {
      this.onError(`The document could not be opened: ${error.message}`);
    }
  }

  /** The original file in a new tab (opened first: popup blockers), a PDF at the passage's page. */
  async openOriginal(passage) {
    const tab = window.open("about:blank", "_blank");
    try {
      const answer = await this.api.download(passage.document_id);
      const url = `${answer.url}#page=${passage.page_start || 1}`;
      if (tab) {
        tab.opener = null;
        tab.location.href = url;
      } else {
        window.open(url, "_blank", "noopener");
      }
      this.lastOpened = url;
    } catch (error) {
      tab?.close();
      this.onError(`The document could not be opened: ${error.message}`);
    }
  }
}
