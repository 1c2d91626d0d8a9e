// The webhooks panel: the tenant's endpoints (register, delete, rotate the secret: shown once) and
// each endpoint's recent delivery attempts (GET /webhooks/{id}/deliveries, refreshed while open).

import { el, formatDate } from "./format.js";

const DELIVERIES_REFRESH_MS = 3000;
const OUTCOME_LABELS = { delivered: "Delivered", failed: "Failed (will retry)", "dead-lettered": "Dead-lettered" };

export class WebhooksPanel {
  constructor({ api, elements, announce, confirmAction }) {
    this.api = api;
    this.elements = elements;
    this.announce = announce;
    this.confirmAction = confirmAction;
    this.open = new Map(); // endpoint id -> timer of its deliveries' refresh
    this.deliveryLoads = 0;
    this.generation = 0;
    elements.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.register();
    });
  }

  reset() {
    this.generation += 1;
    for (const timer of this.open.values()) clearTimeout(timer);
    this.open.clear();
    this.elements.list.replaceChildren();
    this.showSecret(null);
    this.showError("");
  }

  showError(message) {
    this.elements.error.textContent = message;
    this.elements.error.hidden = !message;
  }

  /** The secret, shown once (on register and rotate), never kept by the page. */
  showSecret(endpoint, verb = "registered") {
    const box = this.elements.secret;
    box.hidden = !endpoint;
    if (!endpoint) return box.replaceChildren();
    box.replaceChildren(
      el("p", {}, el("strong", {}, `Endpoint ${verb}. `), `Its signing secret for ${endpoint.url} is shown only now: copy it to your receiver.`),
      el("code", { className: "secret" }, endpoint.secret),
      el("button", { type: "button", className: "secondary", textContent: "Done, hide it", onclick: () => this.showSecret(null) }),
    );
    box.querySelector(".secret").focus?.();
  }

  async load() {
    const generation = this.generation;
    try {
      const answer = await this.api.listWebhooks();
      if (generation !== this.generation) return;
      this.render(answer.endpoints || []);
      this.showError("");
    } catch (error) {
      this.showError(`The webhooks could not be listed: ${error.message}`);
    }
  }

  async register() {
    const { url, events, form } = this.elements;
    const chosen = events.filter((box) => box.checked).map((box) => box.value);
    if (!chosen.length) {
      this.showError("Choose at least one event.");
      return;
    }
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const created = await this.api.createWebhook(url.value.trim(), chosen);
      url.value = "";
      this.showError("");
      this.showSecret(created);
      this.announce(`Webhook endpoint registered for ${created.url}`);
      await this.load();
    } catch (error) {
      this.showError(`Not registered: ${error.message}${error.code && error.status === 400 ? ` (${error.code})` : ""}`);
    } finally {
      button.disabled = false;
    }
  }

  render(endpoints) {
    const { list, empty } = this.elements;
    const keep = new Set(endpoints.map((endpoint) => endpoint.id));
    for (const [id, timer] of this.open) {
      if (!keep.has(id)) {
        clearTimeout(timer);
        this.open.delete(id);
      }
    }
    list.replaceChildren(...endpoints.map((endpoint) => this.renderEndpoint(endpoint)));
    empty.hidden = endpoints.length > 0;
    for (const id of this.open.keys()) this.loadDeliveries(id);
  }

  renderEndpoint(endpoint) {
    const panelId = `deliveries-${endpoint.id}`;
    const toggle = el("button", {
      type: "button", className: "secondary show-deliveries", textContent: "Recent deliveries",
      "aria-expanded": String(this.open.has(endpoint.id)), "aria-controls": panelId,
      onclick: () => this.toggleDeliveries(endpoint.id),
    });
    return el(
      "li",
      { className: "webhook", dataset: { endpointId: endpoint.id } },
      el(
        "div",
        { className: "webhook-head" },
        el("div", {}, el("div", { className: "webhook-url" }, endpoint.url),
          el("div", { className: "muted" }, `${endpoint.events.join(", ")} · since ${formatDate(endpoint.created_at)}`)),
        el(
          "div",
          { className: "webhook-actions" },
          toggle,
          el("button", { type: "button", className: "secondary rotate-secret", textContent: "Rotate secret", "aria-label": `Rotate the secret of ${endpoint.url}`, onclick: () => this.rotate(endpoint) }),
          el("button", { type: "button", className: "danger delete-webhook", textContent: "Delete", "aria-label": `Delete the endpoint ${endpoint.url}`, onclick: () => this.remove(endpoint) }),
        ),
      ),
      el("div", { className: "deliveries", id: panelId, hidden: !this.open.has(endpoint.id) }),
    );
  }

  async rotate(endpoint) {
    const ok = await this.confirmAction("Rotate the signing secret?", `Deliveries to ${endpoint.url} will be signed with a new secret from the next attempt on.`, "Rotate");
    if (!ok) return;
    try {
      this.showSecret(await this.api.rotateWebhookSecret(endpoint.id), "secret rotated");
      this.announce("Secret rotated");
    } catch (error) {
      this.showError(`The secret could not be rotated: ${error.message}`);
    }
  }

  async remove(endpoint) {
    const ok = await this.confirmAction("Delete this endpoint?", `${endpoint.url} will not be told of any further event; deliveries still queued for it are dropped.`, "Delete");
    if (!ok) return;
    try {
      await this.api.deleteWebhook(endpoint.id);
      this.announce(`Endpoint ${endpoint.url} deleted`);
      await this.load();
    } catch (error) {
      this.showError(`The endpoint could not be deleted: ${error.message}`);
    }
  }

  itemOf(id) {
    return this.elements.list.querySelector(`.webhook[data-endpoint-id="${CSS.escape(id)}"]`);
  }

  toggleDeliveries(id) {
    const item = this.itemOf(id);
    if (!item) return;
    const opening = !this.open.has(id);
    item.querySelector(".show-deliveries").setAttribute("aria-expanded", String(opening));
    item.querySelector(".deliveries").hidden = !opening;
    if (opening) {
      this.open.set(id, null);
      this.loadDeliveries(id);
    } else {
      clearTimeout(this.open.get(id));
      this.open.delete(id);
    }
  }

  async loadDeliveries(id) {
    clearTimeout(this.open.get(id));
    const generation = this.generation;
    let content;
    try {
      const answer = await this.api.webhookDeliveries(id);
      content = this.renderDeliveries(answer.deliveries || []);
    } catch (error) {
      content = el("p", { className: "notice error", role: "alert" }, `Deliveries could not be read: ${error.message}`);
    }
    this.deliveryLoads += 1;
    if (generation !== this.generation || !this.open.has(id)) return;
    this.itemOf(id)?.querySelector(".deliveries").replaceChildren(content);
    this.open.set(id, setTimeout(() => this.loadDeliveries(id), DELIVERIES_REFRESH_MS));
  }

  renderDeliveries(deliveries) {
    if (!deliveries.length) return el("p", { className: "muted" }, "No deliveries yet. Attempts show here as documents become ready, fail or are deleted.");
    const head = ["Time", "Event", "Document", "Attempt", "Outcome", "Answer", "Took"];
    return el(
      "table",
      { className: "deliveries-table" },
      el("caption", { className: "visually-hidden" }, "Recent delivery attempts, newest first"),
      el("thead", {}, el("tr", {}, ...head.map((name) => el("th", { scope: "col" }, name)))),
      el(
        "tbody",
        {},
        ...deliveries.map((d) =>
          el(
            "tr",
            { className: "delivery", dataset: { outcome: d.outcome, eventId: d.event_id, documentId: d.document_id || "", attempt: String(d.attempt) } },
            el("td", { dataset: { label: "Time" } }, el("time", { dateTime: d.at }, formatDate(d.at))),
            el("td", { dataset: { label: "Event" } }, d.type),
            el("td", { className: "delivery-document", dataset: { label: "Document" } }, el("code", {}, d.document_id || "")),
            el("td", { className: "num", dataset: { label: "Attempt" } }, d.attempt),
            el("td", { dataset: { label: "Outcome" } }, el("span", { className: `badge outcome-${d.outcome}` }, OUTCOME_LABELS[d.outcome] || d.outcome)),
            el("td", { className: "delivery-answer", dataset: { label: "Answer" } }, d.status_code ? `HTTP ${d.status_code}` : "", d.error && d.error !== `HTTP ${d.status_code}` ? el("span", { className: "muted" }, ` ${d.error}`) : null),
            el("td", { className: "num", dataset: { label: "Took" } }, `${d.duration_ms} ms`),
          ),
        ),
      ),
    );
  }
}
