// Uploads: refuse what can never succeed before sending anything, then send each file straight to
// S3 with the presigned POST the API hands out, with real upload progress events.

import { formatBytes } from "./format.js";

const PDF_MAGIC = "%PDF-";

/** Why a file is refused before upload, or null when it may be uploaded. */
export async function refusalReason(file, maxBytes) {
  if (file.size === 0) return "Refused: the file is empty.";
  if (Number.isFinite(maxBytes) && file.size > maxBytes) {
    let [size, limit] = [formatBytes(file.size), formatBytes(maxBytes)];
    if (size === limit) [size, limit] = [`${file.size} bytes`, `${maxBytes}-byte`]; // just over: say by how much
    return `Refused: ${size} is over the ${limit} limit.`;
  }
  // The content decides, not the name or the type the OS guessed: a PDF starts with "%PDF-".
  const head = new Uint8Array(await file.slice(0, PDF_MAGIC.length).arrayBuffer());
  const magic = String.fromCharCode(...head);
  if (magic !== PDF_MAGIC) return "Refused: not a PDF (the file does not start with %PDF-).";
  return null;
}

/** The API accepts names ending in .pdf only; a real PDF named otherwise gets the suffix. */
export function uploadName(file) {
  return /\.pdf$/i.test(file.name) ? file.name : `${file.name}.pdf`;
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
