// rag-ingest's page: sign in, upload PDFs straight to storage with progress, watch them live,
// search them. Plain ES modules, no build step; config.json (next to the page) says where the API,
// the live channel and the sign-in are.

import { Api } from "./api.js";
import { Auth, identityOf } from "./auth.js";
import { DocumentDetails, names } from "./details.js";
import { DocumentList } from "./documents.js";
import { errorSentence } from "./errors.js";
import { el, formatBytes } from "./format.js";
import { FilterChips } from "./filters.js";
import { LiveChannel } from "./live.js";
import { MetadataEditor, MetadataError } from "./metadata.js";
import { SearchView } from "./search.js";
import { ACCEPTED_FILES, checkUpload, postToStorage } from "./upload.js";

const UPLOAD_CONCURRENCY = 3;
const LIVE_LABELS = { off: "Offline", connecting: "Connecting…", live: "Live updates", polling: "Polling (reconnecting)" };
const $ = (id) => document.getElementById(id);

const state = {
  config: null, auth: null, api: null, documents: null, search: null, live: null, filters: null, webhooks: null,
  sources: null, details: null, uploadMetadata: null, uploads: { started: 0, done: 0, refused: 0, failed: 0 },
};

/** Counters for people debugging and for the browser tests (read-only view of the page's state). */
window.ragIngest = Object.freeze({
  get live() {
    return state.live ? { ...state.live.stats } : { state: "off", connects: 0, messages: 0, errors: 0 };
  },
  get polls() {
    return state.documents?.polls ?? 0;
  },
  get uploads() {
    return { ...state.uploads };
  },
  get searches() {
    return state.search?.searches ?? 0;
  },
  get answers() {
    return { ...(state.search?.answers ?? {}) };
  },
  get lastOpened() {
    return state.search?.lastOpened ?? null;
  },
  get pdfShown() {
    return state.search?.pdfViewer?.shown ?? null;
  },
  get deliveryLoads() {
    return state.webhooks?.deliveryLoads ?? 0;
  },
  get syncLoads() {
    return state.sources?.syncLoads ?? 0;
  },
  get detailSaves() {
    return state.details?.saves ?? 0;
  },
});

function announce(message) {
  const announcer = $("announcer");
  announcer.textContent = "";
  // A fresh text node each time so screen readers announce repeated messages too.
  requestAnimationFrame(() => {
    announcer.textContent = message;
  });
}

function showError(message) {
  const box = $("documents-error");
  box.textContent = message;
  box.hidden = !message;
}

async function loadConfig() {
  const response = await fetch("config.json", { cache: "no-store" });
  if (!response.ok) throw new Error(`config.json answered ${response.status}`);
  const config = await response.json();
  if (!config.apiUrl || !config.auth?.kind) throw new Error("config.json lacks apiUrl or auth");
  return config;
}

// -- signed out / signed in --

function showSignIn(message = "") {
  state.live?.stop();
  state.live = null;
  state.documents?.reset();
  state.search?.reset();
  state.webhooks?.reset();
  $("webhooks-details").open = false; // read again (GET /webhooks) when next opened
  state.sources?.reset();
  $("sources-details").open = false;
  if (state.details?.dialog.open) state.details.dialog.close();
  $("uploads").replaceChildren();
  $("workspace").hidden = true;
  $("who").hidden = true;
  $("sign-in").hidden = false;
  const local = state.config.auth.kind === "local";
  $("local-sign-in").hidden = !local;
  $("cognito-sign-in").hidden = local;
  const error = $("sign-in-error");
  error.textContent = message;
  error.hidden = !message;
  (local ? $("username") : $("cognito-button")).focus();
}

function showWorkspace(session) {
  const who = identityOf(session.claims);
  $("who-user").textContent = who.username;
  $("who-tenant").textContent = who.tenant;
  $("my-sub").textContent = session.claims.sub || "";
  $("who").hidden = false;
  $("sign-in").hidden = true;
  $("workspace").hidden = false;
  state.auth.watchExpiry(session.claims);
  state.documents.load();
  state.live = new LiveChannel(state.config.live, () => state.auth.token(), {
    onDocument: (doc) => state.documents.apply(doc, { source: "live" }),
    onAnswer: (event) => state.search.answerEvent(event),
    onState: (liveState) => {
      const chip = $("live-state");
      chip.dataset.state = liveState;
      chip.textContent = LIVE_LABELS[liveState] || liveState;
      if (liveState === "polling") state.documents.startPolling();
      if (liveState === "live") {
        state.documents.stopPolling();
        state.documents.refreshPending();
      }
    },
  });
  if (state.config.live?.url) state.live.start();
  else state.documents.startPolling(); // no push channel configured: polling is all there is
  $("main").focus();
}

// -- uploads --

function uploadItem(file) {
  const bar = el("progress", { max: 100, value: 0, "aria-label": `Upload of ${file.name}` });
  const status = el("span", { className: "upload-status" }, "Checking…");
  const item = el(
    "li",
    { className: "upload", dataset: { state: "checking" } },
    el("span", { className: "upload-name" }, file.name),
    el("span", { className: "muted upload-size" }, formatBytes(file.size)),
    bar,
    status,
  );
  $("uploads").prepend(item);
  return {
    item,
    set(stateName, message) {
      item.dataset.state = stateName;
      status.textContent = message;
    },
    progress(loaded, total) {
      const percent = total ? Math.round((loaded / total) * 100) : 0;
      bar.value = percent;
      bar.textContent = `${percent} %`;
      status.textContent = `Uploading ${percent} %`;
      // What the browser reported, for people debugging and the browser tests.
      item.dataset.progressEvents = String(Number(item.dataset.progressEvents || 0) + 1);
      item.dataset.progressLoaded = String(loaded);
      item.dataset.progressTotal = String(total);
    },
    finish() {
      bar.value = 100;
      bar.textContent = "100 %";
    },
  };
}

/** The metadata and access the next uploads carry; throws (shown beside the fields) when invalid. */
function uploadOptions() {
  const error = $("upload-options-error");
  error.hidden = true;
  const metadata = state.uploadMetadata.value();
  const users = names($("upload-users").value);
  const groups = names($("upload-groups").value);
  return { metadata, access: users.length || groups.length ? { users, groups } : undefined };
}

/** The API's 400 about the upload's metadata or access, shown beside the field it names. */
function showUploadOptionsError(error) {
  if (error.status !== 400) return;
  if (String(error.message).startsWith("metadata")) state.uploadMetadata.showError(error.message);
  else if (String(error.message).startsWith("access")) {
    $("upload-options-error").textContent = error.message;
    $("upload-options-error").hidden = false;
  }
}

async function uploadOne(file, options) {
  const view = uploadItem(file);
  const { reason, type } = await checkUpload(file, state.config.maxUploadBytes);
  if (reason) {
    state.uploads.refused += 1;
    view.item.querySelector("progress").remove();
    view.set("refused", reason);
    announce(`${file.name}: ${reason}`);
    return;
  }
  state.uploads.started += 1;
  try {
    view.set("uploading", "Requesting an upload link…");
    const ticket = await state.api.createUpload(file.name, type, options);
    view.item.dataset.documentId = ticket.document_id;
    state.documents.placeholder(ticket.document_id, file.name);
    await postToStorage(ticket.upload, file, (loaded, total) => view.progress(loaded, total));
    view.finish();
    view.set("uploaded", "Uploaded; processing (see Documents)");
    state.uploads.done += 1;
    announce(`${file.name} uploaded`);
  } catch (error) {
    state.uploads.failed += 1;
    showUploadOptionsError(error);
    view.set("failed", error.message);
    announce(`${file.name}: ${error.message}`);
  }
}

/** An upload's line follows its document to the end (the list has the details). */
function followUpload(doc) {
  const item = document.querySelector(`#uploads .upload[data-document-id="${CSS.escape(doc.document_id)}"]`);
  if (!item || item.dataset.state !== "uploaded") return;
  const status = item.querySelector(".upload-status");
  if (doc.status === "READY") status.textContent = `Ready: ${doc.page_count ?? "?"} pages, ${doc.chunk_count ?? "?"} passages`;
  else if (doc.status === "FAILED") status.textContent = `Failed: ${errorSentence(doc.error_code)}`;
  else if (doc.status === "PROCESSING" && doc.stage) status.textContent = `Processing: ${doc.stage.toLowerCase()}`;
  else if (doc.status === "QUEUED") status.textContent = "Queued";
  item.dataset.documentStatus = doc.status;
}

async function uploadFiles(fileList) {
  const queue = [...fileList];
  let options;
  try {
    options = uploadOptions();
  } catch (error) {
    if (!(error instanceof MetadataError)) throw error;
    for (const file of queue) {
      const view = uploadItem(file);
      view.item.querySelector("progress").remove();
      view.set("refused", "Not uploaded: fix the metadata above first.");
      state.uploads.refused += 1;
    }
    announce(`Not uploaded: ${error.message}`);
    return;
  }
  const workers = Array.from({ length: Math.min(UPLOAD_CONCURRENCY, queue.length) }, async () => {
    while (queue.length) await uploadOne(queue.shift(), options);
  });
  await Promise.all(workers);
}

function wireUploads() {
  const zone = $("drop-zone");
  const input = $("file-input");
  input.accept = ACCEPTED_FILES;
  input.addEventListener("change", () => {
    const files = [...input.files];
    input.value = ""; // choosing the same file again fires change again
    uploadFiles(files);
  });
  for (const type of ["dragenter", "dragover"]) {
    zone.addEventListener(type, (event) => {
      event.preventDefault();
      zone.classList.add("dragging");
    });
  }
  for (const type of ["dragleave", "drop"]) {
    zone.addEventListener(type, () => zone.classList.remove("dragging"));
  }
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    if (event.dataTransfer?.files?.length) uploadFiles(event.dataTransfer.files);
  });
  // A file dropped beside the zone must not navigate away from the page.
  window.addEventListener("dragover", (event) => event.preventDefault());
  window.addEventListener("drop", (event) => event.preventDefault());
}

// -- confirmations --

function confirmDelete(doc) {
  return confirmAction("Delete document?", `“${doc.filename || doc.document_id}” and its passages will be removed from search.`, "Delete");
}

function confirmAction(title, text, label) {
  const dialog = $("confirm-dialog");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = label;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
  });
}

// -- start --

async function main() {
  try {
    state.config = await loadConfig();
  } catch (error) {
    const box = $("boot-error");
    box.textContent = `The page could not start: ${error.message}`;
    box.hidden = false;
    return;
  }
  const { config } = state;
  $("max-size").textContent = formatBytes(config.maxUploadBytes);
  state.auth = new Auth(config.auth);
  state.auth.onSignedOut = (message) => showSignIn(message);
  state.api = new Api(config.apiUrl, () => state.auth.token(), () => state.auth.expire());
  state.documents = new DocumentList({
    api: state.api,
    elements: { body: $("document-rows"), empty: $("documents-empty"), loadMore: $("load-more"), error: $("documents-error") },
    announce,
    confirmDelete,
    onError: showError,
    onStatus: (doc) => {
      followUpload(doc);
      state.filters.learnKeys(doc.metadata);
    },
    onDetails: (doc) => state.details.show(doc),
  });
  state.filters = new FilterChips({
    key: $("filter-key"), op: $("filter-op"), value: $("filter-value"), as: $("filter-as"), add: $("filter-add"),
    chips: $("filter-chips"), keys: $("filter-keys"), error: $("filter-error"),
  });
  state.search = new SearchView({
    api: state.api,
    viewerDialog: $("viewer-dialog"),
    elements: { form: $("search-form"), query: $("query"), mode: $("mode"), status: $("search-status"), results: $("results"), answer: $("answer") },
    onError: showError,
    filters: state.filters,
    send: (message) => state.live?.send(message) ?? false,
  });
  state.uploadMetadata = new MetadataEditor($("upload-metadata"), "Metadata");
  state.details = new DocumentDetails({
    api: state.api,
    dialog: $("details-dialog"),
    announce,
    onUpdated: (doc) => state.documents.apply(doc, { announce: false }),
  });
  $("webhooks-refresh").addEventListener("click", async () => (await webhooksPanel()).load());
  // The endpoints are read when the panel is opened, not at every sign-in.
  $("webhooks-details").addEventListener("toggle", async () => {
    if ($("webhooks-details").open && !$("workspace").hidden) (await webhooksPanel()).load();
  });
  $("sources-refresh").addEventListener("click", async () => (await sourcesPanel()).load());
  $("sources-details").addEventListener("toggle", async () => {
    if ($("sources-details").open && !$("workspace").hidden) (await sourcesPanel()).load();
  });
  wireUploads();
  $("refresh").addEventListener("click", () => state.documents.load());
  $("sign-out").addEventListener("click", () => state.auth.signOut());
  $("cognito-button").addEventListener("click", () => state.auth.beginCognitoSignIn());
  $("local-sign-in").addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = event.target.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      showWorkspace(await state.auth.signInLocal($("username").value.trim(), $("tenant").value.trim()));
    } catch (error) {
      showSignIn(`Sign-in failed: ${error.message}`);
    } finally {
      button.disabled = false;
    }
  });

  let session = state.auth.session();
  if (!session && config.auth.kind === "cognito") {
    try {
      session = await state.auth.completeCognitoSignIn();
    } catch (error) {
      showSignIn(error.message);
      return;
    }
  }
  if (session) showWorkspace(session);
  else showSignIn();
}

// Each panel's module is fetched when the panel first opens: the first load stays light.
let sourcesLoading = null;
function sourcesPanel() {
  sourcesLoading ??= import("./sources.js").then(({ SourcesPanel }) => {
    state.sources = new SourcesPanel({
      api: state.api,
      elements: {
        form: $("source-form"), kind: $("source-kind"), list: $("source-list"), empty: $("sources-empty"), error: $("sources-error"),
        kindFields: { s3: $("source-s3-fields"), web: $("source-web-fields") },
      },
      announce,
    });
    return state.sources;
  });
  return sourcesLoading;
}

let webhooksLoading = null;
function webhooksPanel() {
  webhooksLoading ??= import("./webhooks.js").then(({ WebhooksPanel }) => {
    state.webhooks = new WebhooksPanel({
      api: state.api,
      elements: {
        form: $("webhook-form"), url: $("webhook-url"), events: [...document.querySelectorAll("input[name=webhook-event]")],
        list: $("webhook-list"), empty: $("webhooks-empty"), error: $("webhooks-error"), secret: $("webhook-secret"),
      },
      announce,
      confirmAction,
    });
    return state.webhooks;
  });
  return webhooksLoading;
}

main();
