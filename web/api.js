// The HTTP API client: every request carries the ID token; every error becomes an ApiError with the
// API's one error shape {"error": {"code", "message"}} (or API Gateway's {"message"}).

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export class Api {
  constructor(baseUrl, tokenProvider, onUnauthorized) {
    this.baseUrl = String(baseUrl).replace(/\/+$/, "");
    this.tokenProvider = tokenProvider;
    this.onUnauthorized = onUnauthorized;
  }

  async request(method, path, body, extraHeaders = {}) {
    const token = this.tokenProvider();
    if (!token) {
      this.onUnauthorized();
      throw new ApiError(401, "UNAUTHORIZED", "Signed out");
    }
    const headers = { ...extraHeaders, Authorization: `Bearer ${token}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      throw new ApiError(0, "NETWORK", `The API could not be reached (${error.message}).`);
    }
    const text = await response.text();
    let payload = null;
    if (text) {
      try {
        payload = JSON.parse(text);
      } catch {
        payload = null;
      }
    }
    if (response.status === 401) {
      this.onUnauthorized();
      throw new ApiError(401, "UNAUTHORIZED", "Your session is no longer valid. Sign in again.");
    }
    if (!response.ok) {
      const error = payload?.error;
      throw new ApiError(
        response.status,
        error?.code || `HTTP_${response.status}`,
        error?.message || payload?.message || `${method} ${path} failed with ${response.status}`,
      );
    }
    return payload;
  }

  listDocuments(cursor, limit = 20) {
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor) query.set("cursor", cursor);
    return this.request("GET", `/documents?${query}`);
  }

  getDocument(id) {
    return this.request("GET", `/documents/${encodeURIComponent(id)}`);
  }

  /** ``contentType``: what the file is (upload.js sniffUpload); ``extra``: optional ``metadata`` and
   * ``access`` ({users, groups}), sent only when given. */
  createUpload(filename, contentType, extra = {}) {
    const body = { filename, content_type: contentType };
    if (extra.metadata && Object.keys(extra.metadata).length) body.metadata = extra.metadata;
    if (extra.access) body.access = extra.access;
    return this.request("POST", "/documents", body);
  }

  /** PATCH a document's metadata and/or access, conditional on the revision read (If-Match). */
  updateDocument(id, changes, revision) {
    const headers = revision === undefined || revision === null ? {} : { "If-Match": `"${revision}"` };
    return this.request("PATCH", `/documents/${encodeURIComponent(id)}`, changes, headers);
  }

  retry(id) {
    return this.request("POST", `/documents/${encodeURIComponent(id)}/retry`);
  }

  remove(id) {
    return this.request("DELETE", `/documents/${encodeURIComponent(id)}`);
  }

  /** The extracted blocks of a non-PDF document (its rendered view). */
  content(id) {
    return this.request("GET", `/documents/${encodeURIComponent(id)}/content`);
  }

  download(id) {
    return this.request("GET", `/documents/${encodeURIComponent(id)}/download`);
  }

  search(query, mode, k = 5, filter = null) {
    // The matched passages, not their sections (the API's default): the page opens and marks the
    // spot a passage matched, at its own page (docs/api.md, "Small-to-big").
    const body = { query, mode, k, expand: "none" };
    if (filter) body.filter = filter;
    return this.request("POST", "/search", body);
  }

  answer(query, mode, k = 5, filter = null) {
    const body = { query, mode, k };
    if (filter) body.filter = filter;
    return this.request("POST", "/answer", body);
  }

  listWebhooks() {
    return this.request("GET", "/webhooks");
  }

  createWebhook(url, events) {
    return this.request("POST", "/webhooks", { url, events });
  }

  deleteWebhook(id) {
    return this.request("DELETE", `/webhooks/${encodeURIComponent(id)}`);
  }

  rotateWebhookSecret(id) {
    return this.request("POST", `/webhooks/${encodeURIComponent(id)}/rotate-secret`);
  }

  webhookDeliveries(id) {
    return this.request("GET", `/webhooks/${encodeURIComponent(id)}/deliveries`);
  }

  listSources() {
    return this.request("GET", "/sources");
  }

  createSource(body) {
    return this.request("POST", "/sources", body);
  }

  startSync(id) {
    return this.request("POST", `/sources/${encodeURIComponent(id)}/sync`);
  }

  listSyncs(id) {
    return this.request("GET", `/sources/${encodeURIComponent(id)}/syncs`);
  }

  getSync(id, syncId) {
    return this.request("GET", `/sources/${encodeURIComponent(id)}/syncs/${encodeURIComponent(syncId)}`);
  }
}
