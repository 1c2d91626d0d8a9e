// A human sentence for each error code a document can fail with (rag_ingest/core/errors.py ErrorCode).
// A browser test checks that every code the domain package defines has its sentence here.
export const ERROR_SENTENCES = Object.freeze({
  UNSUPPORTED_TYPE: "This file's type is not accepted (PDF, Word .docx, PowerPoint .pptx, Excel .xlsx, CSV, HTML, Markdown or text).",
  FILE_TOO_LARGE: "This file is larger than the upload limit.",
  TOO_MANY_PAGES: "This document has more pages or slides than the limit.",
  ENCRYPTED_PDF: "This PDF is password-protected.",
  CORRUPT_PDF: "This PDF is damaged and cannot be read.",
  PDF_TOO_COMPLEX: "This PDF is too complex to read within the limits (too much content or text on its pages).",
  NO_TEXT_LAYER: "This PDF has no text layer (scanned pages without text).",
  LEGACY_OFFICE_FORMAT: "This is an old binary Office file (.doc, .ppt or .xls): save it as .docx, .pptx or .xlsx.",
  MACRO_ENABLED_DOCUMENT: "This Office file contains macros (.docm, .pptm or .xlsm): save it without them.",
  CORRUPT_DOCUMENT: "This document is damaged and cannot be read.",
  DOCUMENT_TOO_COMPLEX: "This document is too large or too deeply nested to read within the limits.",
  UNSAFE_XML: "This document contains XML declarations that are not allowed (entities or a DTD).",
  TOO_MANY_ROWS: "This spreadsheet has more rows than the limit.",
  TOO_MANY_CELLS: "This spreadsheet has more cells than the limit.",
  CELL_TOO_LARGE: "A cell of this spreadsheet holds more text than the limit.",
  UNKNOWN_ENCODING: "This text file's character encoding could not be recognised.",
  EMPTY_FILE: "This file is empty (0 bytes).",
  EMPTY_DOCUMENT: "This document contains no text to index.",
  OBJECT_NOT_FOUND: "The uploaded file was not found in storage.",
  INVALID_OBJECT_KEY: "The file was stored under a path that names no valid workspace.",
  INPUT_TOO_LONG: "A passage was too long for the embedding model.",
  EMBEDDING_BATCH_FAILED: "The batch embedding job for this document failed. Retrying usually works.",
  INVALID_REQUEST: "The request for this document was invalid.",
  TRANSIENT_RETRIES_EXHAUSTED: "A temporary service problem persisted through every retry. Retrying usually works.",
  EMBEDDING_CAPACITY: "The embedding model's quota stayed in use by other documents for longer than processing waits. Retrying usually works.",
  TIMEOUT: "Processing took too long and was stopped.",
  STUCK: "Processing stalled and was stopped.",
  SUPERSEDED: "A newer upload of this document replaced this one.",
  SOURCE_OBJECT_MISSING: "The uploaded file was removed from storage after it was processed.",
  INTERNAL_ERROR: "An unexpected error stopped processing.",
});

export const GENERIC_SENTENCE = "Processing failed.";

/** Statuses that end without an error code. */
export const STATUS_SENTENCES = Object.freeze({
  EXPIRED: "The upload never arrived before its upload link expired.",
});

/** The sentence for an error code; a generic one for a code this page does not know yet. */
export function errorSentence(code) {
  return (code && Object.hasOwn(ERROR_SENTENCES, code)) ? ERROR_SENTENCES[code] : GENERIC_SENTENCE;
}
