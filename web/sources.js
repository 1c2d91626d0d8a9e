// The sources panel: the tenant's sources (S3, web, custom) with their last sync and its statistics,
// a form that adds an S3 or web source, "Sync now", and a sync's statistics and failed items, read
// again every few seconds while IN_PROGRESS (GET /sources/{id}/syncs/{sync_id}). docs/sources.md.

import { el, formatDate } from "./format.js";

export const SYNC_REFRESH_MS = 3000;
export const STATISTICS = ["scanned", "added", "modified", "unchanged", "deleted", "failed"];
const STATUS_CLASS = { COMPLETE: "status-ready", FAILED: "status-failed", IN_PROGRESS: "status-processing" };
const STATUS_LABEL = { COMPLETE: "Complete", FAILED: "Failed", IN_PROGRESS: "In progress" };

/** Comma- or newline-separated values, trimmed, empties and repeats dropped. */
export function listOf(text) {
  return [...new Set(String(text || "").split(/[\n,]/).map((part) => part.trim()).filter(Boolean))];
}

/** POST /sources's body from the form's values; throws an Error naming the field when one is missing. */
export function sourceBody(values) {
  const kind = values.kind;
  let config;
  let name = String(values.name || "").trim();
  if (kind === "s3") {
    const bucket = String(values.bucket || "").trim();
    if (!bucket) throw new Error("An S3 source needs a bucket.");
    config = { bucket };
    if (values.prefix) config.prefix = String(values.prefix).trim();
    const include = listOf(values.include);
    const exclude = listOf(values.exclude);
    if (include.length) config.include = include;
    if (exclude.length) config.exclude = exclude;
    name ||= `s3://${bucket}/${config.prefix || ""}`;
  } else if (kind === "web") {
    const seeds = listOf(values.seeds);
    const sitemaps = listOf(values.sitemaps);
    if (!seeds.length && !sitemaps.length) throw new Error("A web source needs a seed URL or a sitemap.");
    config = { seeds, sitemaps };
    for (const [field, key] of [["maxPages", "max_pages"], ["maxDepth", "max_depth"]]) {
      const text = String(values[field] ?? "").trim();
      if (!text) continue;
      const number = Number(text);
      if (!Number.isInteger(number) || number < 1) throw new Error(`${key}: a whole number of at least 1.`);
      config[key] = number;
    }
    if (!name) {
      try {
        name = new URL(seeds[0] || sitemaps[0]).host;
      } catch {
        throw new Error(`Not a URL: ${seeds[0] || sitemaps[0]}`);
      }
    }
  } else {
    throw new Error(`Unknown kind ${kind}.`);
  }
  const body = { kind, name, config };
  const schedule = String(values.schedule || "").trim();
  if (schedule) body.schedule = schedule;
  return body;
}

/** Where a source reads from, in one line. */
export function whereOf(source) {
  const config = source.config || {};
  if (source.kind === "s3") return `s3://${config.bucket ?? "?"}/${config.prefix || ""}`;
  if (source.kind === "web") return [...(config.seeds || []), ...(config.sitemaps || []).map((url) => `sitemap ${url}`)].join(", ");
  return "Pushed items (PUT /sources/{id}/items/{external_id})";
}

export function statusBadge(sync) {
  if (!sync) return el("span", { className: "badge" }, "Never synced");
  return el("span", { className: `badge ${STATUS_CLASS[sync.status] || ""}`.trim() }, STATUS_LABEL[sync.status] || sync.status);
}

/** The six counters as a definition list, in Bedrock's order; a missing counter reads 0. */
export function renderStatistics(statistics) {
  const stats = statistics || {};
  return el(
    "dl",
    { className: "sync-statistics" },
    ...STATISTICS.flatMap((name) => [
      el("dt", {}, name),
      el("dd", { dataset: { statistic: name } }, String(Number(stats[name]) || 0)),
    ]),
  );
}

/** One sync: status, times, statistics and each failed item (its URI, code and reason), all as text. */
export function renderSync(sync) {
  const failures = sync.failures || [];
  const failed = Number(sync.statistics?.failed) || 0;
  const times = sync.ended_at ? `${formatDate(sync.started_at)} → ${formatDate(sync.ended_at)}` : `started ${formatDate(sync.started_at)}`;
  return el(
    "div",
    { className: "sync", dataset: { syncId: sync.id, status: sync.status } },
    el("div", { className: "sync-head" }, statusBadge(sync), el("span", { className: "muted" }, ` ${times}`),
      el("code", { className: "muted" }, ` ${sync.id}`)),
    sync.status === "IN_PROGRESS"
      ? el("p", { className: "muted", dataset: { listed: String(Number(sync.listed) || 0) } },
          `Listed ${Number(sync.listed) || 0} so far; counted below as they are applied.`)
      : null,
    sync.status === "IN_PROGRESS" && !sync.listing_complete
      ? el("p", { className: "muted" }, "Still listing: nothing is deleted until the listing completes.")
      : null,
    renderStatistics(sync.statistics),
    failures.length
      ? el(
          "div",
          { className: "sync-failures" },
          el("p", {}, failed > failures.length ? `Failed items (first ${failures.length} of ${failed}):` : "Failed items:"),
          el(
            "ul",
            {},
            ...failures.map((failure) =>
              el(
                "li",
                { className: "sync-failure", dataset: { code: failure.code || "" } },
                el("span", { className: "sync-failure-item" }, failure.uri || failure.item || ""),
                " ",
                el("code", {}, failure.code || ""),
                failure.reason ? el("span", { className: "muted" }, ` ${failure.reason}`) : null,
              ),
            ),
          ),
        )
      : null,
  );
}

export class SourcesPanel {
  constructor({ api, elements, announce }) {
    this.api = api;
    this.elements = elements;
    this.announce = announce;
    this.open = new Map(); // source id -> {timer} while its syncs are shown
    this.syncLoads = 0;
    this.generation = 0;
    elements.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.add();
    });
    elements.kind.addEventListener("change", () => this.showKind());
    this.showKind();
  }

  reset() {
    this.generation += 1;
    for (const { timer } of this.open.values()) clearTimeout(timer);
    this.open.clear();
    this.elements.list.replaceChildren();
    this.showError("");
  }

  showKind() {
    const kind = this.elements.kind.value;
    for (const [name, box] of Object.entries(this.elements.kindFields)) {
      box.hidden = name !== kind;
      for (const input of box.querySelectorAll("input, textarea")) input.disabled = name !== kind;
    }
    this.elements.form.querySelector("#source-bucket").required = kind === "s3";
  }

  showError(message) {
    this.elements.error.textContent = message;
    this.elements.error.hidden = !message;
  }

  async load() {
    const generation = this.generation;
    try {
      const answer = await this.api.listSources();
      if (generation !== this.generation) return;
      this.render(answer.sources || []);
      this.showError("");
    } catch (error) {
      this.showError(`The sources could not be listed: ${error.message}`);
    }
  }

  formValues() {
    const values = {};
    for (const input of this.elements.form.querySelectorAll("[name]")) values[input.name] = input.value;
    return values;
  }

  async add() {
    const button = this.elements.form.querySelector("button[type=submit]");
    let body;
    try {
      body = sourceBody(this.formValues());
    } catch (error) {
      this.showError(error.message);
      return;
    }
    button.disabled = true;
    try {
      const created = await this.api.createSource(body);
      this.elements.form.reset();
      this.showKind();
      this.showError("");
      this.announce(`Source ${created.name} added`);
      await this.load();
    } catch (error) {
      this.showError(`Not added: ${error.message}${error.status === 400 && error.code ? ` (${error.code})` : ""}`);
    } finally {
      button.disabled = false;
    }
  }

  render(sources) {
    const { list, empty } = this.elements;
    const keep = new Set(sources.map((source) => source.id));
    for (const [id, { timer }] of this.open) {
      if (!keep.has(id)) {
        clearTimeout(timer);
        this.open.delete(id);
      }
    }
    list.replaceChildren(...sources.map((source) => this.renderSource(source)));
    empty.hidden = sources.length > 0;
    for (const id of this.open.keys()) this.loadSyncs(id);
  }

  renderSource(source) {
    const panelId = `syncs-${source.id}`;
    const last = source.last_sync;
    return el(
      "li",
      { className: "source", dataset: { sourceId: source.id, kind: source.kind, lastStatus: last?.status || "" } },
      el(
        "div",
        { className: "webhook-head" },
        el(
          "div",
          {},
          el("div", { className: "source-name" }, el("span", { className: "source-title" }, source.name), " ", el("span", { className: "badge source-kind" }, source.kind)),
          el("div", { className: "muted source-where" }, whereOf(source), source.schedule ? ` · schedule ${source.schedule}` : ""),
          el("div", { className: "source-last" }, statusBadge(last), last ? el("span", { className: "muted" }, ` ${formatDate(last.ended_at || last.started_at)}`) : null),
        ),
        el(
          "div",
          { className: "webhook-actions" },
          source.kind === "custom"
            ? null
            : el("button", { type: "button", className: "sync-now", textContent: "Sync now", "aria-label": `Sync ${source.name} now`, onclick: () => this.sync(source) }),
          el("button", {
            type: "button", className: "secondary show-syncs", textContent: "Syncs",
            "aria-expanded": String(this.open.has(source.id)), "aria-controls": panelId,
            onclick: () => this.toggleSyncs(source.id),
          }),
        ),
      ),
      last ? renderStatistics(last.statistics) : null,
      el("div", { className: "syncs", id: panelId, hidden: !this.open.has(source.id) }),
    );
  }

  itemOf(id) {
    return this.elements.list.querySelector(`.source[data-source-id="${CSS.escape(id)}"]`);
  }

  async sync(source) {
    try {
      await this.api.startSync(source.id);
      this.announce(`Sync of ${source.name} started`);
      this.showError("");
    } catch (error) {
      if (error.code !== "SYNC_IN_PROGRESS") {
        this.showError(`The sync could not start: ${error.message}`);
        return;
      }
      this.showError(`${source.name} is already syncing: its progress is shown below.`);
    }
    this.showSyncs(source.id);
  }

  toggleSyncs(id) {
    if (this.open.has(id)) {
      clearTimeout(this.open.get(id).timer);
      this.open.delete(id);
      const item = this.itemOf(id);
      if (item) {
        item.querySelector(".show-syncs").setAttribute("aria-expanded", "false");
        item.querySelector(".syncs").hidden = true;
      }
    } else {
      this.showSyncs(id);
    }
  }

  showSyncs(id) {
    const item = this.itemOf(id);
    if (!item) return;
    item.querySelector(".show-syncs").setAttribute("aria-expanded", "true");
    item.querySelector(".syncs").hidden = false;
    if (!this.open.has(id)) this.open.set(id, { timer: null });
    this.loadSyncs(id);
  }

  /** The source's syncs, newest first; while the newest is IN_PROGRESS, it is read again (GET of the
   * sync) every SYNC_REFRESH_MS, and the source's line follows it. */
  async loadSyncs(id, runningSyncId = null) {
    const entry = this.open.get(id);
    if (!entry) return;
    clearTimeout(entry.timer);
    const generation = this.generation;
    let syncs;
    let content;
    try {
      if (runningSyncId) {
        const current = await this.api.getSync(id, runningSyncId);
        syncs = [current, ...(entry.older || [])];
      } else {
        syncs = (await this.api.listSyncs(id)).syncs || [];
        entry.older = syncs.slice(1, 5);
      }
      content = syncs.length
        ? el("div", {}, ...syncs.slice(0, 5).map((sync) => renderSync(sync)))
        : el("p", { className: "muted" }, "Never synced.");
    } catch (error) {
      syncs = [];
      content = el("p", { className: "notice error", role: "alert" }, `The syncs could not be read: ${error.message}`);
    }
    this.syncLoads += 1;
    if (generation !== this.generation || this.open.get(id) !== entry) return;
    const item = this.itemOf(id);
    if (!item) return;
    item.querySelector(".syncs").replaceChildren(content);
    const newest = syncs[0];
    if (newest) this.followLast(item, newest);
    if (newest?.status === "IN_PROGRESS") {
      entry.timer = setTimeout(() => this.loadSyncs(id, newest.id), SYNC_REFRESH_MS);
    } else if (runningSyncId && newest) {
      this.announce(`Sync ${STATUS_LABEL[newest.status]?.toLowerCase() || newest.status}`);
    }
  }

  /** The source's own line shows the newest sync's status and statistics too. */
  followLast(item, sync) {
    item.dataset.lastStatus = sync.status;
    const last = item.querySelector(".source-last");
    last.replaceChildren(statusBadge(sync), el("span", { className: "muted" }, ` ${formatDate(sync.ended_at || sync.started_at)}`));
    const stats = renderStatistics(sync.statistics);
    const current = item.querySelector(":scope > .sync-statistics");
    if (current) current.replaceWith(stats);
    else item.querySelector(".syncs").before(stats);
  }
}
