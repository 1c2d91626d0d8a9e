// The documents list: newest first, paginated with the API's cursor, updated in place by live
// messages (or by polling non-terminal documents while the live channel is down).

import { errorSentence, STATUS_SENTENCES } from "./errors.js";
import { documentDurationMs, el, formatDate, formatDuration, TERMINAL_STATUSES } from "./format.js";

const POLL_INTERVAL_MS = 3000;
const HIDDEN_STATUSES = new Set(["DELETED"]);

const STATUS_LABELS = {
  AWAITING_UPLOAD: "Uploading",
  QUEUED: "Queued",
  PROCESSING: "Processing",
  READY: "Ready",
  FAILED: "Failed",
  DELETING: "Deleting",
  DELETED: "Deleted",
  EXPIRED: "Expired",
};

export class DocumentList {
  constructor({ api, elements, announce, confirmDelete, onError, onStatus = () => {}, onDetails = null }) {
    this.api = api;
    this.elements = elements;
    this.announce = announce;
    this.confirmDelete = confirmDelete;
    this.onError = onError;
    this.onStatus = onStatus;
    this.onDetails = onDetails;
    this.documents = new Map();
    this.rows = new Map();
    this.cursor = null;
    this.pollTimer = null;
    this.polls = 0;
    this.generation = 0;
    elements.loadMore.addEventListener("click", () => this.loadMore());
  }

  /** Signed out: forget everything (answers still on their way are dropped by the generation). */
  reset() {
    this.stopPolling();
    this.clear();
  }

  clear() {
    this.generation += 1;
    this.documents.clear();
    this.rows.clear();
    this.cursor = null;
    this.elements.body.replaceChildren();
    this.render();
  }

  /** The first page again (polling, if it is on, carries on). */
  async load() {
    this.clear();
    await this.loadMore();
  }

  async loadMore() {
    const { loadMore } = this.elements;
    const generation = this.generation;
    loadMore.disabled = true;
    try {
      const page = await this.api.listDocuments(this.cursor);
      if (generation !== this.generation) return; // signed out or reloaded meanwhile
      for (const doc of page.items || []) this.apply(doc, { announce: false, source: "list" });
      this.cursor = page.next_cursor || null;
      this.showError("");
    } catch (error) {
      this.showError(`The documents could not be listed: ${error.message}`);
    } finally {
      loadMore.disabled = false;
      loadMore.hidden = !this.cursor;
      this.render();
    }
  }

  showError(message) {
    this.elements.error.textContent = message;
    this.elements.error.hidden = !message;
  }

  /** Apply a document's JSON (from the list, a live message, a poll, or an action's answer). */
  apply(doc, { announce = true, source = "api" } = {}) {
    if (!doc || typeof doc.document_id !== "string") return;
    const previous = this.documents.get(doc.document_id);
    // Messages and polls can cross: never let an older state overwrite a newer one.
    if (previous && previous.updated_at && doc.updated_at && doc.updated_at < previous.updated_at) return;
    this.documents.set(doc.document_id, doc);
    if (announce && previous?.status !== doc.status) {
      this.announce(`${doc.filename || doc.document_id}: ${STATUS_LABELS[doc.status] || doc.status}`);
    }
    const row = this.renderRow(doc);
    if (row) row.dataset.source = source; // where the shown state came from: list, live, poll or api
    this.render();
    this.onStatus(doc);
  }

  /** A document this page just created, before the API's record reaches it. */
  placeholder(documentId, filename) {
    if (this.documents.has(documentId)) return;
    const now = new Date().toISOString();
    this.apply(
      {
        document_id: documentId,
        status: "AWAITING_UPLOAD",
        filename,
        stage: null,
        progress: null,
        pages_parsed: null,
        waiting_for: null,
        lane: null,
        attempts: {},
        error_code: null,
        error_detail: null,
        page_count: null,
        failed_pages: [],
        chunk_count: null,
        timings_ms: {},
        created_at: now,
        updated_at: "", // any record from the API wins
      },
      { announce: false },
    );
  }

  sorted() {
    return [...this.documents.values()]
      .filter((doc) => !HIDDEN_STATUSES.has(doc.status))
      .sort((a, b) => (b.created_at || "").localeCompare(a.created_at || "") || b.document_id.localeCompare(a.document_id));
  }

  /** Put the rows in order (newest first) and drop deleted ones, reusing row elements. */
  render() {
    const { body, empty } = this.elements;
    const visible = this.sorted();
    for (const [id, row] of this.rows) {
      if (!visible.some((doc) => doc.document_id === id)) {
        row.remove();
        this.rows.delete(id);
      }
    }
    visible.forEach((doc, index) => {
      const row = this.rows.get(doc.document_id) || this.renderRow(doc);
      if (body.children[index] !== row) body.insertBefore(row, body.children[index] || null);
    });
    empty.hidden = visible.length > 0;
  }

  renderRow(doc) {
    if (HIDDEN_STATUSES.has(doc.status)) return null;
    const row = el("tr", { dataset: { documentId: doc.document_id, status: doc.status, lane: doc.lane || "" } });
    // While Parse's page ranges run, pages parsed of the page count; from Chunk on, chunks embedded.
    const parsing = doc.stage === "PARSE" && Number.isFinite(doc.pages_parsed) && doc.page_count > 0;
    const chunks = doc.progress && Number.isFinite(doc.progress.total) && doc.progress.total > 0 ? doc.progress : null;
    const progress = parsing ? { done: doc.pages_parsed, total: doc.page_count } : chunks;
    const unit = parsing ? "pages" : "chunks";
    const done = progress ? Math.min(progress.done ?? 0, progress.total) : 0;
    const progressCell = progress
      ? el(
          "span",
          { className: "progress-cell" },
          el("progress", { max: progress.total, value: done, "aria-label": `${doc.filename}: ${done} of ${progress.total} ${unit}` }),
          el("span", { className: "muted" }, `${done}/${progress.total}`),
        )
      : doc.status === "READY"
        ? el("span", { className: "muted" }, "done")
        : "";
    const duration = documentDurationMs(doc);
    const fileCell = el("td", { className: "file", dataset: { label: "File" } }, el("span", { className: "filename" }, doc.filename || doc.document_id));
    if (this.onDetails && doc.status !== "DELETING" && doc.status !== "AWAITING_UPLOAD") {
      // Its metadata and access, and the editor (web/details.js).
      fileCell.append(
        " ",
        el("button", { type: "button", className: "link details", textContent: "Details", "aria-label": `Details of ${doc.filename}: metadata and access`, onclick: () => this.onDetails(doc) }),
      );
    }
    if (doc.status === "FAILED" || STATUS_SENTENCES[doc.status]) {
      const sentence = doc.status === "FAILED" ? errorSentence(doc.error_code) : STATUS_SENTENCES[doc.status];
      fileCell.append(
        el(
          "div",
          { className: "failure", dataset: { errorCode: doc.error_code || "" } },
          el("strong", { className: "failure-sentence" }, sentence),
          doc.error_code ? el("code", {}, doc.error_code) : null,
          doc.error_detail ? el("span", { className: "failure-detail" }, doc.error_detail) : null,
        ),
      );
    }
    const actions = el("td", { className: "actions", dataset: { label: "Actions" } });
    if (doc.status === "FAILED") {
      actions.append(
        el("button", { type: "button", className: "secondary retry", textContent: "Retry", "aria-label": `Retry ${doc.filename}`, onclick: () => this.retry(doc) }),
      );
    }
    if (doc.status !== "DELETING") {
      actions.append(
        el("button", { type: "button", className: "danger delete", textContent: "Delete", "aria-label": `Delete ${doc.filename}`, onclick: () => this.remove(doc) }),
      );
    }
    row.append(
      fileCell,
      el("td", { className: "status", dataset: { label: "Status" } }, el("span", { className: `badge status-${doc.status.toLowerCase()}` }, STATUS_LABELS[doc.status] || doc.status)),
      el(
        "td",
        { className: "stage", dataset: { label: "Stage" } },
        doc.status === "PROCESSING" || doc.status === "FAILED" ? (doc.stage || "").toLowerCase() : "",
        // Its Embed tasks gave way to other documents' on the shared embedding quota: waiting, not stuck.
        doc.status === "PROCESSING" && doc.waiting_for === "EMBEDDING_CAPACITY"
          ? el("div", { className: "muted waiting", dataset: { waitingFor: doc.waiting_for } }, "waiting for embedding capacity")
          : null,
      ),
      el("td", { className: "progress", dataset: { label: "Progress" } }, progressCell),
      el(
        "td",
        { className: "num pages", dataset: { label: "Pages" } },
        doc.page_count ?? "",
        // Big documents run in their own lane (their own workers): say so where the page count is.
        doc.lane === "bulk"
          ? el("span", { className: "lane muted", title: "Big documents run in the bulk lane, beside small ones, never ahead of them" }, " bulk lane")
          : null,
      ),
      el("td", { className: "num chunks", dataset: { label: "Chunks" } }, doc.chunk_count ?? ""),
      el("td", { className: "created", dataset: { label: "Created" } }, el("time", { dateTime: doc.created_at }, formatDate(doc.created_at))),
      el("td", { className: "num duration", dataset: { label: "Duration" } }, formatDuration(duration)),
      actions,
    );
    const old = this.rows.get(doc.document_id);
    if (old) {
      // Keep keyboard focus on the same action across a re-render.
      const focused = old.contains(document.activeElement) ? document.activeElement.className : null;
      old.replaceWith(row);
      if (focused) row.querySelector(`[class="${focused}"]`)?.focus();
    }
    this.rows.set(doc.document_id, row);
    return row;
  }

  async retry(doc) {
    try {
      this.apply(await this.api.retry(doc.document_id));
      this.announce(`${doc.filename}: retry started`);
    } catch (error) {
      this.onError(`Retry of ${doc.filename} failed: ${error.message}`);
    }
  }

  async remove(doc) {
    if (!(await this.confirmDelete(doc))) return;
    try {
      await this.api.remove(doc.document_id);
      this.documents.set(doc.document_id, { ...doc, status: "DELETED", updated_at: new Date().toISOString() });
      this.render();
      this.announce(`${doc.filename} deleted`);
    } catch (error) {
      this.onError(`Delete of ${doc.filename} failed: ${error.message}`);
    }
  }

  // -- polling fallback (live channel down) --

  startPolling() {
    if (this.pollTimer) return;
    const poll = async () => {
      this.polls += 1;
      const generation = this.generation;
      const pending = [...this.documents.values()].filter((doc) => !TERMINAL_STATUSES.has(doc.status));
      await Promise.all(
        pending.map(async (doc) => {
          try {
            const current = await this.api.getDocument(doc.document_id);
            if (generation === this.generation) this.apply(current, { source: "poll" });
          } catch (error) {
            if (error.status === 404 && generation === this.generation) {
              this.documents.delete(doc.document_id);
              this.render();
            }
          }
        }),
      );
      if (this.pollTimer) this.pollTimer = setTimeout(poll, POLL_INTERVAL_MS);
    };
    this.pollTimer = setTimeout(poll, 0);
  }

  stopPolling() {
    clearTimeout(this.pollTimer);
    this.pollTimer = null;
  }

  /** After a reconnect: one refresh of what is still in flight (messages may have been missed). */
  async refreshPending() {
    const generation = this.generation;
    const pending = [...this.documents.values()].filter((doc) => !TERMINAL_STATUSES.has(doc.status));
    await Promise.all(
      pending.map((doc) =>
        this.api.getDocument(doc.document_id).then(
          (current) => generation === this.generation && this.apply(current, { source: "poll" }),
          () => {},
        ),
      ),
    );
  }
}
