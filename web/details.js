// A document's details: metadata and access, and an editor that changes them with PATCH
// /documents/{id} on the revision read (If-Match; 412: changed meanwhile; 403: the API's reason).

import { el, formatDate } from "./format.js";
import { describe, MetadataEditor, MetadataError, TYPES } from "./metadata.js";

/** "a, b ,c" → ["a", "b", "c"] (empty parts dropped, each once). */
export function names(text) {
  return [...new Set(String(text || "").split(",").map((part) => part.trim()).filter(Boolean))];
}

function sameJson(a, b) {
  const canonical = (value) =>
    JSON.stringify(value, (key, inner) => (inner && typeof inner === "object" && !Array.isArray(inner) ? Object.fromEntries(Object.entries(inner).sort()) : inner));
  return canonical(a) === canonical(b);
}

export class DocumentDetails {
  constructor({ api, dialog, onUpdated, announce }) {
    this.api = api;
    this.dialog = dialog;
    this.onUpdated = onUpdated;
    this.announce = announce;
    this.doc = null;
    this.saves = 0;
    this.title = dialog.querySelector("#details-title");
    this.summary = dialog.querySelector("#details-summary");
    this.current = dialog.querySelector("#details-metadata");
    this.access = dialog.querySelector("#details-access");
    this.message = dialog.querySelector("#details-message");
    this.users = dialog.querySelector("#details-users");
    this.groups = dialog.querySelector("#details-groups");
    this.save = dialog.querySelector("#details-save");
    this.editor = new MetadataEditor(dialog.querySelector("#details-editor"), "Metadata");
    dialog.querySelector("#details-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    dialog.querySelector("#details-close").addEventListener("click", () => dialog.close());
  }

  /** Open for a document: read it fresh (its revision is what the PATCH is conditional on). */
  async show(doc) {
    // Nothing of the document shown before stays editable: what is typed before the fresh read
    // arrives would be overwritten by it, and a save would go to the wrong revision.
    this.doc = null;
    delete this.dialog.dataset.documentId;
    delete this.dialog.dataset.revision;
    this.title.textContent = doc.filename || doc.document_id;
    this.setMessage("");
    if (!this.dialog.open) this.dialog.showModal();
    await this.reload(doc.document_id);
  }

  async reload(documentId = this.doc?.document_id) {
    this.setLoading(true);
    try {
      this.render(await this.api.getDocument(documentId));
    } catch (error) {
      this.setMessage(`The document could not be read: ${error.message}`, "error");
    } finally {
      this.setLoading(false);
    }
  }

  /** The editor's fields, disabled while the document is read. */
  setLoading(loading) {
    this.dialog.setAttribute("aria-busy", String(loading));
    for (const field of this.dialog.querySelectorAll("#details-form input, #details-form select, #details-form button")) {
      if (field.id !== "details-close") field.disabled = loading || (field === this.save && !this.doc);
    }
  }

  render(doc) {
    this.doc = doc;
    this.dialog.dataset.documentId = doc.document_id;
    this.dialog.dataset.revision = doc.revision ?? "";
    this.title.textContent = doc.filename || doc.document_id;
    const facts = [
      ["Status", doc.status],
      ["Uploaded", formatDate(doc.created_at)],
      doc.uploaded_by ? ["Uploaded by", doc.uploaded_by] : null,
      doc.revision !== undefined && doc.revision !== null ? ["Revision", String(doc.revision)] : null,
    ].filter(Boolean);
    this.summary.replaceChildren(...facts.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
    const rows = describe(doc.metadata);
    this.current.replaceChildren(
      ...(rows.length
        ? rows.map(({ key, type, text }) => el("li", { className: "meta-shown", dataset: { key } }, el("code", {}, key), ` (${TYPES[type].toLowerCase()}): `, el("span", { className: "meta-text" }, text)))
        : [el("li", { className: "muted" }, "No metadata.")]),
    );
    const access = doc.access || { users: [], groups: [] };
    const who = (s) => [...(s?.users || []).map((u) => `user ${u}`), ...(s?.groups || []).map((g) => `group ${g}`)].join(", ");
    const [readers, editors, denied] = [who(access), who(access.editors), who(access.deny)];
    this.access.textContent = (readers ? `Only ${readers} (and admins).` : "Everyone in the tenant.")
      + (editors ? ` Editors: ${editors}.` : "") + (denied ? ` Denied: ${denied}.` : "");
    this.editor.setValue(doc.metadata || {});
    this.users.value = (access.users || []).join(", ");
    this.groups.value = (access.groups || []).join(", ");
  }

  setMessage(text, kind = "muted", action = null) {
    this.message.className = kind === "error" ? "notice error" : kind === "ok" ? "notice ok" : "muted";
    this.message.replaceChildren(text, action ? " " : "", action || "");
    this.message.hidden = !text;
    this.message.dataset.kind = kind;
  }

  /** What changed, as PATCH's body; null when nothing did. */
  changes() {
    const changes = {};
    const metadata = this.editor.value(); // throws MetadataError, shown beside the field
    if (!sameJson(metadata, this.doc.metadata || {})) changes.metadata = metadata;
    const before = this.doc.access || { users: [], groups: [] };
    const readers = { users: names(this.users.value), groups: names(this.groups.value) };
    // PATCH replaces access as a whole: the editors and deny lists go back as they were read.
    if (!sameJson(readers, { users: before.users || [], groups: before.groups || [] })) changes.access = { ...before, ...readers };
    return Object.keys(changes).length ? changes : null;
  }

  async submit() {
    if (!this.doc) return;
    let changes;
    try {
      changes = this.changes();
    } catch (error) {
      if (error instanceof MetadataError) return;
      throw error;
    }
    if (!changes) {
      this.setMessage("Nothing changed.");
      return;
    }
    this.save.disabled = true;
    try {
      const updated = await this.api.updateDocument(this.doc.document_id, changes, this.doc.revision);
      this.render(updated);
      this.onUpdated(updated);
      this.setMessage("Saved.", "ok");
      this.announce(`${updated.filename || updated.document_id}: changes saved`);
    } catch (error) {
      this.showFailure(error);
    } finally {
      this.saves += 1;
      this.save.disabled = false;
    }
  }

  showFailure(error) {
    if (error.status === 412) {
      const reload = el("button", { type: "button", className: "secondary reload-document", textContent: "Reload", onclick: () => this.reload().then(() => this.setMessage("Reloaded: this is the current version.")) });
      this.setMessage("This document was changed elsewhere since you opened it: reload it, then make your change again.", "error", reload);
    } else if (error.status === 400 && String(error.message).startsWith("metadata")) {
      this.editor.showError(error.message);
      this.setMessage("The metadata was refused: see the field above.", "error");
    } else {
      this.setMessage(`Not saved: ${error.message}`, "error");
    }
  }
}
