// Search filters as removable chips, each one condition of Bedrock Knowledge Bases' RetrievalFilter
// ({"<operator>": {"key", "value"}}), combined with andAll (docs/api.md "Filters"). A 400 names the
// JSON path of the bad part: its chip is marked, and the path shown.

import { el } from "./format.js";
import { BUILTIN_KEYS, KEY_PATTERN } from "./metadata.js";

export const OPERATORS = {
  equals: "=",
  notEquals: "≠",
  greaterThan: ">",
  greaterThanOrEquals: "≥",
  lessThan: "<",
  lessThanOrEquals: "≤",
  in: "is one of",
  notIn: "is none of",
  startsWith: "starts with",
  listContains: "list contains",
  stringContains: "contains",
};
const LIST_OPS = new Set(["in", "notIn"]);
/** What the built-ins hold (a page is a number; created_at an ISO 8601 date; the others text). */
const BUILTIN_TYPES = { page: "number" };

export class FilterError extends Error {}

function typed(raw, as) {
  const text = raw.trim();
  if (as === "number") {
    const number = Number(text);
    if (!text || !Number.isFinite(number)) throw new FilterError(`“${text}” is not a number`);
    return number;
  }
  if (as === "boolean") {
    if (text !== "true" && text !== "false") throw new FilterError("a yes/no value is true or false");
    return text === "true";
  }
  return text;
}

/** One condition from the form's fields; throws FilterError with a sentence. */
export function conditionOf(key, op, rawValue, as) {
  key = key.trim();
  if (!BUILTIN_KEYS.includes(key) && !KEY_PATTERN.test(key)) {
    throw new FilterError("a key is a built-in or a metadata key (lowercase letters, digits, _)");
  }
  if (!Object.hasOwn(OPERATORS, op)) throw new FilterError(`unknown operator ${op}`);
  if (!rawValue.trim()) throw new FilterError("a value is needed");
  const value = LIST_OPS.has(op)
    ? rawValue.split(",").map((item) => item.trim()).filter(Boolean).map((item) => typed(item, as))
    : typed(rawValue, as);
  return { [op]: { key, value } };
}

/** The filter for a list of conditions: none, the one, or andAll of them. */
export function combine(conditions) {
  if (!conditions.length) return null;
  return conditions.length === 1 ? conditions[0] : { andAll: conditions };
}

/** Which chip an API path points at: "filter.andAll[2]…" → 2, "filter.equals…" → 0 (one chip). */
export function chipIndexOf(path, count) {
  const match = /^filter\.andAll\[(\d+)\]/.exec(path);
  if (match) return Number(match[1]);
  return count === 1 && path.startsWith("filter.") ? 0 : null;
}

export function describeCondition(condition) {
  const [op, { key, value }] = Object.entries(condition)[0];
  const shown = Array.isArray(value) ? value.map((v) => JSON.stringify(v)).join(", ") : JSON.stringify(value);
  return `${key} ${OPERATORS[op]} ${shown}`;
}

export class FilterChips {
  constructor({ key, op, value, as, add, chips, keys, error }) {
    Object.assign(this, { keyInput: key, opSelect: op, valueInput: value, asSelect: as, chipList: chips, keyList: keys, errorBox: error });
    this.conditions = [];
    this.userKeys = new Set();
    for (const [name, label] of Object.entries(OPERATORS)) opSelect(op, name, label);
    add.addEventListener("click", () => this.addFromForm());
    for (const input of [key, value]) {
      input.addEventListener("keydown", (event) => {
        if (event.key === "Enter") {
          event.preventDefault(); // Enter adds the chip, it does not search
          this.addFromForm();
        }
      });
    }
    key.addEventListener("change", () => {
      const builtin = BUILTIN_TYPES[key.value.trim()];
      if (builtin) as.value = builtin;
    });
    this.renderKeys();
  }

  /** Metadata keys seen on documents, offered beside the built-ins. */
  learnKeys(metadata) {
    const before = this.userKeys.size;
    for (const key of Object.keys(metadata || {})) this.userKeys.add(key);
    if (this.userKeys.size !== before) this.renderKeys();
  }

  renderKeys() {
    const option = (key, label) => el("option", { value: key, label });
    this.keyList.replaceChildren(
      ...BUILTIN_KEYS.map((key) => option(key, "built-in")),
      ...[...this.userKeys].sort().map((key) => option(key, "metadata")),
    );
  }

  addFromForm() {
    try {
      const condition = conditionOf(this.keyInput.value, this.opSelect.value, this.valueInput.value, this.asSelect.value);
      this.conditions.push(condition);
      this.valueInput.value = "";
      this.showError("");
      this.render();
      this.keyInput.focus();
    } catch (error) {
      if (!(error instanceof FilterError)) throw error;
      this.showError(`Filter not added: ${error.message}.`);
    }
  }

  remove(index) {
    this.conditions.splice(index, 1);
    this.showError("");
    this.render();
    (this.chipList.querySelectorAll(".chip-remove")[Math.min(index, this.conditions.length - 1)] || this.keyInput).focus();
  }

  clear() {
    this.conditions = [];
    this.showError("");
    this.render();
  }

  filter() {
    return combine(this.conditions);
  }

  render() {
    this.chipList.replaceChildren(
      ...this.conditions.map((condition, index) => {
        const text = describeCondition(condition);
        return el(
          "li",
          { className: "chip", dataset: { index: String(index), filter: JSON.stringify(condition) } },
          el("span", { className: "chip-text" }, text),
          el("button", { type: "button", className: "chip-remove", textContent: "×", "aria-label": `Remove filter ${text}`, onclick: () => this.remove(index) }),
        );
      }),
    );
    this.chipList.hidden = !this.conditions.length;
  }

  showError(message, path = "") {
    const box = this.errorBox;
    box.replaceChildren();
    if (path) box.append("Filter refused at ", el("code", { className: "filter-path" }, path), `: ${message}`);
    else box.textContent = message;
    box.hidden = !message;
    const index = path ? chipIndexOf(path, this.conditions.length) : null;
    this.chipList.querySelectorAll(".chip").forEach((chip, i) => chip.classList.toggle("invalid", i === index));
  }

  /** The API's 400 on the filter ("filter.andAll[1].greaterThan.value: …"): true when it was one. */
  showApiError(error) {
    const match = /^(filter[^\s:]*): (.*)$/s.exec(error.message || "");
    if (error.status !== 400 || !match) return false;
    this.showError(match[2], match[1]);
    return true;
  }
}

function opSelect(select, name, label) {
  select.append(el("option", { value: name, textContent: `${label} (${name})` }));
}
