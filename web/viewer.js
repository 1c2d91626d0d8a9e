// The rendered view of a DOCX, PPTX, HTML, Markdown or text document (GET /documents/{id}/content):
// its extracted blocks, a slide or a section per anchor, with the search hit's paragraph marked and
// scrolled to. A PDF opens in the browser's own viewer at its page instead (search.js).

import { el } from "./format.js";

/** The id of a block in the view: prefixed, so a document's anchor never clashes with the page's ids. */
export const viewId = (anchor) => `view-${anchor}`;

/** Where a passage stands in the view: its paragraph, else its section (the slide for a PPTX). */
export function passageTarget(passage) {
  const section = passage.anchor || "";
  if (passage.paragraph_index) return viewId(section ? `${section}-p${passage.paragraph_index}` : `p${passage.paragraph_index}`);
  return section ? viewId(section) : null;
}

function renderTable(text) {
  const [header, ...rows] = text.split("\n").map((line) => line.split(" | "));
  return el(
    "table",
    { className: "view-table" },
    el("thead", {}, el("tr", {}, ...header.map((cell) => el("th", { scope: "col" }, cell)))),
    el("tbody", {}, ...rows.map((row) => el("tr", {}, ...row.map((cell) => el("td", {}, cell))))),
  );
}

function renderBlock(block) {
  const id = viewId(block.anchor);
  if (block.kind === "heading") {
    const level = Math.min(6, Math.max(3, block.level + 2)); // under the dialog's own h2
    return el(`h${level}`, { id, className: "view-heading" }, block.text);
  }
  if (block.kind === "table") return el("div", { id, className: "view-block" }, renderTable(block.text));
  return el("p", { id, className: "view-block" }, block.text);
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
    const target = passageTarget(passage);
    const element = target ? body.querySelector(`#${CSS.escape(target)}`) : null;
    if (element) {
      element.classList.add("view-hit");
      element.scrollIntoView({ block: "center" });
    }
    this.shown = { documentId: content.document_id, target: element ? target : null };
    return this.shown;
  }
}
