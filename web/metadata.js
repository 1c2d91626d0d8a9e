// A document's metadata editor: the API's rules (rag_ingest/core/metadata.py) checked before
// sending; the API's own 400 shown beside the field it names.

import { el } from "./format.js";

export const KEY_PATTERN = /^[a-z][a-z0-9_]{0,63}$/;
export const MAX_KEYS = 32;
export const MAX_STRING_CHARS = 1024;
export const MAX_LIST_ITEMS = 50;
/** The built-ins a filter can name; with the chunk index's own fields, no user key may take them. */
export const BUILTIN_KEYS = ["filename", "created_at", "page", "content_type", "document_id"];
const RESERVED_KEYS = new Set([
  ...BUILTIN_KEYS,
  "tenant_id", "version", "chunk_index", "page_start", "page_end", "heading_path", "text", "indexed_text",
  "embedding", "metadata", "status",
]);
const DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?$/;
export const TYPES = { string: "Text", number: "Number", boolean: "Yes / no", date: "Date", list: "List of text" };

let editors = 0;

/** Why a key is refused, or null. */
export function keyProblem(key) {
  if (!KEY_PATTERN.test(key)) return "a key is a lowercase letter, then up to 63 lowercase letters, digits or _";
  if (RESERVED_KEYS.has(key)) return `'${key}' is a reserved name`;
  return null;
}

/** The editor's type for a stored value. */
export function typeOf(value) {
  if (Array.isArray(value)) return "list";
  if (typeof value === "boolean") return "boolean";
  if (typeof value === "number") return "number";
  if (typeof value === "string" && DATE.test(value)) return "date";
  return "string";
}

/** A stored value as the editor's text. */
export function textOf(value) {
  return Array.isArray(value) ? value.join(", ") : String(value);
}

/** "key: value" lines for showing a document's metadata. */
export function describe(metadata) {
  return Object.entries(metadata || {}).map(([key, value]) => ({ key, type: typeOf(value), text: textOf(value) }));
}

export class MetadataError extends Error {
  constructor(key, message) {
    super(key ? `metadata.${key}: ${message}` : `metadata: ${message}`);
    this.key = key;
  }
}

function parseValue(key, type, raw) {
  const text = raw.trim();
  if (type === "number") {
    const number = Number(text);
    if (!text || !Number.isFinite(number)) throw new MetadataError(key, "a number is needed");
    if (Number.isInteger(number) && Math.abs(number) > 2 ** 53) throw new MetadataError(key, "an integer within ±2^53");
    return number;
  }
  if (type === "boolean") return text === "true";
  if (type === "date") {
    if (!DATE.test(text)) throw new MetadataError(key, "a date is YYYY-MM-DD, or YYYY-MM-DDTHH:MM[:SS] with Z or ±HH:MM");
    return text;
  }
  if (type === "list") {
    const items = text ? text.split(",").map((item) => item.trim()).filter(Boolean) : [];
    if (items.length > MAX_LIST_ITEMS) throw new MetadataError(key, `a list holds at most ${MAX_LIST_ITEMS} strings`);
    if (items.some((item) => item.length > MAX_STRING_CHARS)) throw new MetadataError(key, `at most ${MAX_STRING_CHARS} characters each`);
    return items;
  }
  if (raw.length > MAX_STRING_CHARS) throw new MetadataError(key, `at most ${MAX_STRING_CHARS} characters`);
  return raw;
}

/** The key an API message names ("metadata.tags[1]: …" → "tags"), or null. */
export function keyInMessage(message) {
  const match = /^metadata\.([a-z][a-z0-9_]*)/.exec(String(message || ""));
  return match ? match[1] : null;
}

export class MetadataEditor {
  /** ``legend``: the fieldset's title; the editor builds its own markup inside ``container``. */
  constructor(container, legend) {
    this.id = `meta-${(editors += 1)}`;
    this.rows = el("div", { className: "meta-rows" });
    this.error = el("p", { className: "field-error", id: `${this.id}-error`, role: "alert", hidden: true });
    this.add = el("button", { type: "button", className: "secondary add-field", textContent: "Add field", onclick: () => this.addRow().key.focus() });
    this.root = el(
      "fieldset",
      { className: "metadata-editor" },
      el("legend", {}, legend),
      this.rows,
      el("div", { className: "meta-actions" }, this.add, el("small", { className: "muted" }, "Keys: a-z, 0-9, _ (starting with a letter). Lists: comma-separated.")),
      this.error,
    );
    container.append(this.root);
    this.count = 0;
  }

  addRow(key = "", type = "string", value = "") {
    this.count += 1;
    const n = `${this.id}-${this.count}`;
    const keyInput = el("input", { className: "meta-key", id: `${n}-key`, value: key, maxLength: 64, autocomplete: "off", spellcheck: false, "aria-describedby": this.error.id });
    const typeSelect = el("select", { className: "meta-type", id: `${n}-type` }, ...Object.entries(TYPES).map(([name, label]) => el("option", { value: name, textContent: label, selected: name === type })));
    const valueCell = el("div", { className: "meta-value-cell" });
    const row = el(
      "div",
      { className: "meta-row" },
      el("div", { className: "field" }, el("label", { htmlFor: keyInput.id }, "Key"), keyInput),
      el("div", { className: "field" }, el("label", { htmlFor: typeSelect.id }, "Type"), typeSelect),
      valueCell,
    );
    const setValueControl = (text) => {
      const id = `${n}-value`;
      const control =
        typeSelect.value === "boolean"
          ? el("select", { className: "meta-value", id }, el("option", { value: "true", textContent: "yes (true)", selected: text !== "false" }), el("option", { value: "false", textContent: "no (false)", selected: text === "false" }))
          : el("input", {
              className: "meta-value", id, value: text, "aria-describedby": this.error.id,
              placeholder: { date: "YYYY-MM-DD", list: "a, b, c", number: "0" }[typeSelect.value] || "",
              inputMode: typeSelect.value === "number" ? "decimal" : undefined,
            });
      valueCell.replaceChildren(el("div", { className: "field" }, el("label", { htmlFor: id }, "Value"), control));
    };
    setValueControl(value);
    typeSelect.addEventListener("change", () => setValueControl(row.querySelector(".meta-value").value));
    const remove = el("button", {
      type: "button", className: "secondary remove-field", textContent: "Remove",
      onclick: () => { row.remove(); this.clearError(); },
    });
    const label = () => remove.setAttribute("aria-label", `Remove field ${keyInput.value || "(no key)"}`);
    keyInput.addEventListener("input", label);
    label();
    row.append(remove);
    this.rows.append(row);
    return { row, key: keyInput };
  }

  /** Show ``metadata`` (replacing the rows). */
  setValue(metadata) {
    this.rows.replaceChildren();
    this.clearError();
    for (const { key, type, text } of describe(metadata)) this.addRow(key, type, text);
  }

  /** The metadata object; throws MetadataError (shown beside the field) when a rule is broken. */
  value() {
    this.clearError();
    const metadata = {};
    try {
      for (const row of this.rows.querySelectorAll(".meta-row")) {
        const key = row.querySelector(".meta-key").value.trim();
        const type = row.querySelector(".meta-type").value;
        const raw = row.querySelector(".meta-value").value;
        if (!key && !raw.trim()) continue; // an empty row is no field
        const problem = keyProblem(key);
        if (problem) throw new MetadataError(key || null, problem);
        if (Object.hasOwn(metadata, key)) throw new MetadataError(key, "this key is given twice");
        metadata[key] = parseValue(key, type, raw);
      }
      if (Object.keys(metadata).length > MAX_KEYS) throw new MetadataError(null, `at most ${MAX_KEYS} keys`);
    } catch (error) {
      if (error instanceof MetadataError) this.showError(error.message, error.key);
      throw error;
    }
    return metadata;
  }

  /** A message beside the editor; the row of the key it names (if any) is marked invalid. */
  showError(message, key = keyInMessage(message)) {
    this.error.textContent = message;
    this.error.hidden = false;
    for (const row of this.rows.querySelectorAll(".meta-row")) {
      const bad = key !== null && key !== undefined && row.querySelector(".meta-key").value.trim() === key;
      row.classList.toggle("invalid", bad);
      row.querySelector(".meta-key").setAttribute("aria-invalid", String(bad));
    }
  }

  clearError() {
    this.error.textContent = "";
    this.error.hidden = true;
    for (const row of this.rows.querySelectorAll(".meta-row.invalid")) {
      row.classList.remove("invalid");
      row.querySelector(".meta-key").setAttribute("aria-invalid", "false");
    }
  }
}
