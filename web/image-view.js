// The image viewer: a hit in an image document (PNG, JPEG, TIFF) drawn on a canvas, the passage's
// rectangles laid over it as the PDF viewer lays them (loaded the first time such a hit is opened).
// Browsers decode PNG and JPEG; a TIFF page is shown as a sheet of its size with the rectangles.

import { el } from "./format.js";
import { boxStyle } from "./pdf-view.js";

const STYLES_URL = new URL("./pdf-view.css", import.meta.url).href;

/** The size of the TIFF's page ``number`` (1-based) from its directory chain, or null. */
export function tiffPageSize(bytes, number) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const little = bytes[0] === 0x49;
  let offset = view.getUint32(4, little);
  for (let page = 1; offset && offset + 2 <= bytes.length; page += 1) {
    const entries = view.getUint16(offset, little);
    if (page === number) {
      const size = {};
      for (let index = 0; index < entries; index += 1) {
        const at = offset + 2 + 12 * index;
        const tag = view.getUint16(at, little);
        const short = view.getUint16(at + 2, little) === 3;
        if (tag === 256 || tag === 257) size[tag] = short ? view.getUint16(at + 8, little) : view.getUint32(at + 8, little);
      }
      return size[256] && size[257] ? { width: size[256], height: size[257] } : null;
    }
    offset = view.getUint32(offset + 2 + 12 * entries, little);
  }
  return null;
}

/** Open an image hit in the search view's dialog (SearchView.open). */
export async function showImage(view, passage) {
  const original = view.viewerDialog.querySelector("#viewer-original");
  if (original) original.hidden = true;
  view.imageViewer ??= new ImageViewer({ api: view.api, dialog: view.viewerDialog });
  const shown = await view.imageViewer.show(passage, passage.filename);
  view.lastOpened = `image:${shown.documentId}#page=${shown.pages[0]}`;
}

export class ImageViewer {
  constructor({ api, dialog }) {
    this.api = api;
    this.dialog = dialog;
    this.shown = null; // {documentId, pages, boxes} of the last view, for the tests
  }

  async show(passage, filename) {
    if (!document.querySelector(`link[href="${STYLES_URL}"]`)) {
      document.head.append(el("link", { rel: "stylesheet", href: STYLES_URL }));
    }
    const body = this.dialog.querySelector("#viewer-content");
    this.dialog.querySelector("#viewer-title").textContent = filename || passage.document_id;
    body.replaceChildren(el("p", { className: "muted" }, "Loading the image…"));
    if (!this.dialog.open) this.dialog.showModal();
    const { url } = await this.api.download(passage.document_id);
    const answer = await fetch(url);
    if (!answer.ok) throw new Error(`the download answered ${answer.status}`);
    const blob = await answer.blob();
    const number = Number(passage.page_start) || 1;
    const width = Math.max(body.clientWidth - 4, 200);
    const sheet = el("section", { className: "pdf-page", dataset: { page: number }, "aria-label": `Page ${number}` });
    const marks = (passage.boxes || [])
      .filter((box) => box.page === number)
      .map((box) => {
        const mark = el("div", { className: "pdf-passage" });
        Object.assign(mark.style, boxStyle(box));
        return mark;
      });
    let size;
    let note = null;
    if (passage.document_format === "tiff") {
      size = tiffPageSize(new Uint8Array(await blob.arrayBuffer()), number) || { width: 850, height: 1100 };
      note = el("p", { className: "muted" }, "The browser does not draw TIFF images: the passage's place on the page is marked.");
    } else {
      const bitmap = await createImageBitmap(blob);
      size = { width: bitmap.width, height: bitmap.height };
      const canvas = el("canvas", { className: "pdf-canvas" });
      canvas.width = bitmap.width;
      canvas.height = bitmap.height;
      canvas.getContext("2d").drawImage(bitmap, 0, 0);
      bitmap.close();
      sheet.append(canvas);
    }
    const scale = width / size.width;
    sheet.style.width = `${width}px`;
    sheet.style.height = `${Math.round(size.height * scale)}px`;
    sheet.append(el("div", { className: "pdf-marks" }, ...marks));
    body.replaceChildren(...(note ? [note, sheet] : [sheet]));
    (body.querySelector(".pdf-passage") || sheet).scrollIntoView({ block: "center" });
    this.shown = { documentId: passage.document_id, text: passage.text, pages: [number], boxes: marks.length };
    return this.shown;
  }
}
