// The rendered view of a DOCX, PPTX, HTML, Markdown or text document (GET /documents/{id}/content):
// its extracted blocks, a slide or a section per anchor, with the search hit's paragraph marked and
// scrolled to. A PDF opens in the browser's own viewer at its page instead (search.js).

import { decodeEntities, el } from "./format.js";

const squeeze = (text) => text.replace(/\s+/g, " ").trim().toLowerCase();

/** The words the search highlighted in the passage (its <em> runs), lower-cased. */
export function highlightedWords(passage) {
  const words = [];
  for (const fragment of passage.highlights || []) {
    for (const match of String(fragment).matchAll(/<em>(.*?)<\/em>/gi)) words.push(squeeze(decodeEntities(match[1])));
  }
  return words.filter(Boolean);
}

/** The id of a block in the view: prefixed, so a document's anchor never clashes with the page's ids. */
export const viewId = (anchor) => `view-${anchor}`;

/** Where a passage stands in the view: its paragraph, else its section (the slide for a PPTX). */
export function passageTarget(passage) {
  const section = passage.anchor || "";
  if (passage.paragraph_index) return viewId(section ? `${section}-p${passage.paragraph_index}` : `p${passage.paragraph_index}`);
  return section ? viewId(section) : null;
}

function renderTable(text) {
  // Cells are joined by " | "; an empty first or last cell leaves "| b" or "a |" once lines are trimmed.
  const [header, ...rows] = text.split("\n").map((line) => line.split(/ ?\| ?/));
  return el(
    "table",
    { className: "view-table" },
    el("thead", {}, el("tr", {}, ...header.map((cell) => el("th", { scope: "col" }, cell)))),
    el("tbody", {}, ...rows.map((row) => el("tr", {}, ...row.map((cell) => el("td", {}, cell))))),
  );
}

function renderBlock(block) {
  // data-text: the block's text as extracted (a table's cells with their " | "), what passages hold.
  const props = { id: viewId(block.anchor), dataset: { text: block.text } };
  if (block.kind === "heading") {
    const level = Math.min(6, Math.max(3, block.level + 2)); // under the dialog's own h2
    return el(`h${level}`, { ...props, className: "view-heading" }, block.text);
  }
  if (block.kind === "table") return el("div", { ...props, className: "view-block" }, renderTable(block.text));
  if (block.kind === "figure") {
    // A figure's text is lines: its caption, then alt text, text in the image... each labelled.
    const lines = block.text.split("\n").map((line) => el("p", {}, line));
    return el("figure", { ...props, className: "view-block view-figure" }, ...lines);
  }
  return el("p", { ...props, className: "view-block" }, block.text);
}

export class DocumentViewer {
  constructor({ api, dialog }) {
    this.api = api;
    this.dialog = dialog;
    this.shown = null; // {documentId, target} of the last view, for the tests
    dialog.querySelector("#viewer-close").addEventListener("click", () => dialog.close());
  }

  /** Fetch the document's blocks, render them and show the passage where it stands. */
  async show(passage) {
    const content = await this.api.content(passage.document_id);
    const body = this.dialog.querySelector("#viewer-content");
    const slides = content.document_format === "pptx";
    body.replaceChildren(
      ...content.pages.map((page) => el(
        "section",
        { className: slides ? "view-slide" : "view-page", dataset: { page: page.page_number } },
        slides ? el("p", { className: "muted view-slide-number" }, `Slide ${page.page_number}`) : null,
        ...page.blocks.map(renderBlock),
      )),
    );
    this.dialog.querySelector("#viewer-title").textContent = content.filename || content.document_id;
    if (!this.dialog.open) this.dialog.showModal();
    const start = passageTarget(passage);
    const first = start ? body.querySelector(`#${CSS.escape(start)}`) : null;
    const span = first ? this.passageSpan(body, first, passage) : [];
    for (const block of span) block.classList.add("view-passage");
    // Where the passage stands: the block of it that holds most of the search's words (the first
    // such block on a tie), or its first block when the search marked none.
    const words = [...new Set(highlightedWords(passage))];
    let focus = first;
    let best = 0;
    for (const block of span) {
      const text = squeeze(block.dataset.text);
      const found = words.filter((word) => text.includes(word)).length;
      if (found > best) [focus, best] = [block, found];
    }
    if (focus) {
      focus.classList.add("view-hit");
      focus.scrollIntoView({ block: "center" });
    }
    this.shown = { documentId: content.document_id, target: focus ? focus.id : null, span: span.map((block) => block.id) };
    return this.shown;
  }

  /** The blocks the passage covers: from its first one, each next block whose text is in the passage. */
  passageSpan(body, first, passage) {
    const text = squeeze(passage.text || "");
    const blocks = [...body.querySelectorAll(".view-block, .view-heading")];
    const span = [];
    for (const block of blocks.slice(blocks.indexOf(first))) {
      const start = squeeze(block.dataset.text).slice(0, 60);
      if (span.length && !text.includes(start)) break;
      span.push(block);
    }
    return span;
  }
}
