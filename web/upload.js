// Uploads: refuse what can never succeed before sending anything, then send each file to S3
// with the API's presigned POST, with real upload progress events.

import { formatBytes } from "./format.js";

const OOXML = "application/vnd.openxmlformats-officedocument.";
const ZIPS = { docx: `${OOXML}wordprocessingml.document`, pptx: `${OOXML}presentationml.presentation`, xlsx: `${OOXML}spreadsheetml.sheet` };
const TYPES_BY_EXTENSION = Object.freeze({
  pdf: "application/pdf", ...ZIPS, html: "text/html", htm: "text/html", md: "text/markdown",
  markdown: "text/markdown", txt: "text/plain", csv: "text/csv", tsv: "text/tab-separated-values",
  png: "image/png", jpg: "image/jpeg", jpeg: "image/jpeg", tif: "image/tiff", tiff: "image/tiff",
});
/** The file picker's filter: the formats the pipeline reads (rag_ingest/core/upload_types.py). */
export const ACCEPTED_FILES = [...Object.keys(TYPES_BY_EXTENSION).map((ext) => `.${ext}`), ...new Set(Object.values(TYPES_BY_EXTENSION))].join(",");
const isText = (type) => /^text\//.test(type);
/** Limits: MAX_TEXT_FORMAT_BYTES, MAX_IMAGE_BYTES in rag_ingest/core/upload_types.py. */
export const MAX_TEXT_FORMAT_BYTES = 20 * 1024 * 1024;
const MAX_IMAGE_BYTES = 10485760;
const IMAGES = [["png", [137, 80, 78, 71]], ["jpeg", [255, 216, 255]], ["tiff", [73, 73, 42, 0]], ["tiff", [77, 77, 0, 42]]];

const startsWith = (head, bytes) => bytes.every((byte, index) => head[index] === byte);
const ascii = (text) => [...text].map((character) => character.charCodeAt(0));
const extensionOf = (name) => (/\.([a-z0-9]+)$/i.exec(name)?.[1] || "").toLowerCase();

/** What the file is, by its first bytes, then its name: {type} to declare, or {refusal}. */
export async function sniffUpload(file) {
  const head = new Uint8Array(await file.slice(0, 1024).arrayBuffer());
  const extension = extensionOf(file.name);
  if (startsWith(head, ascii("%PDF-"))) return { type: "application/pdf" };
  if (startsWith(head, [0x50, 0x4b, 0x03, 0x04])) {
    if (ZIPS[extension]) return { type: ZIPS[extension] };
    if (/^(doc|ppt|xls)m$/.test(extension)) return { refusal: `Refused: macros (MACRO_ENABLED_DOCUMENT); save as .${extension.slice(0, 3)}x.` };
    return { refusal: "Refused: a zip that is not a .docx, .pptx or .xlsx file." };
  }
  if (startsWith(head, [0xd0, 0xcf, 0x11, 0xe0])) return { refusal: "Refused: an old binary Office file (LEGACY_OFFICE_FORMAT)." };
  const image = IMAGES.find(([, signature]) => startsWith(head, signature));
  if (image) return { type: `image/${image[0]}` };
  if (startsWith(head, ascii("GIF8"))) return { refusal: "Refused: a GIF image (PNG, JPEG and TIFF are read)." };
  const utf16 = startsWith(head, [0xff, 0xfe]) || startsWith(head, [0xfe, 0xff]);
  if (!utf16 && head.includes(0)) return { refusal: "Refused: binary data, not a document the pipeline reads." };
  const declared = TYPES_BY_EXTENSION[extension];
  if (isText(declared)) return { type: declared };
  const start = new TextDecoder().decode(head).trimStart().toLowerCase();
  return { type: start.startsWith("<!doctype html") || start.startsWith("<html") ? "text/html" : "text/plain" };
}

/** Why a file is refused before upload ({reason}), or the type to declare ({type}). */
export async function checkUpload(file, maxBytes) {
  if (file.size === 0) return { reason: "Refused: the file is empty." };
  const sniffed = await sniffUpload(file);
  if (sniffed.refusal) return { reason: sniffed.refusal };
  const cap = isText(sniffed.type) ? MAX_TEXT_FORMAT_BYTES : sniffed.type.startsWith("image/") ? MAX_IMAGE_BYTES : maxBytes;
  const limit = Math.min(maxBytes, cap);
  if (Number.isFinite(limit) && file.size > limit) {
    let [size, limitText] = [formatBytes(file.size), formatBytes(limit)];
    if (size === limitText) [size, limitText] = [`${file.size} bytes`, `${limit}-byte`]; // just over: say by how much
    return { reason: `Refused: ${size} is over the ${limitText} limit.` };
  }
  return { type: sniffed.type };
}

/** S3's XML error (<Error><Code/><Message/></Error>) as one sentence. */
export function s3ErrorMessage(status, responseText) {
  let code = "";
  let message = "";
  if (responseText) {
    const xml = new DOMParser().parseFromString(responseText, "application/xml");
    if (!xml.querySelector("parsererror")) {
      code = xml.querySelector("Error > Code")?.textContent?.trim() || "";
      message = xml.querySelector("Error > Message")?.textContent?.trim() || "";
    }
  }
  if (code || message) return `Storage refused the upload (${status}${code ? ` ${code}` : ""}): ${message || code}`;
  return `Storage refused the upload (HTTP ${status}).`;
}

export class UploadError extends Error {}

/** POST the file with the presigned form; onProgress(loaded, total) on each upload progress event. */
export function postToStorage(form, file, onProgress) {
  return new Promise((resolve, reject) => {
    const body = new FormData();
    for (const [name, value] of Object.entries(form.fields || {})) body.append(name, value);
    body.append("file", file, file.name); // S3 ignores every field after "file": it must be last
    const xhr = new XMLHttpRequest();
    xhr.open("POST", form.url);
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress(event.loaded, event.total);
    });
    xhr.addEventListener("load", () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve();
      } else {
        reject(new UploadError(s3ErrorMessage(xhr.status, xhr.responseText)));
      }
    });
    xhr.addEventListener("error", () => reject(new UploadError("The upload failed: storage could not be reached.")));
    xhr.addEventListener("abort", () => reject(new UploadError("The upload was cancelled.")));
    xhr.send(body);
  });
}
