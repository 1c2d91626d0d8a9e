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

  async request(method, path, body) {
    const token = this.tokenProvider();
    if (!token) {
      this.onUnauthorized();
      throw new ApiError(401, "UNAUTHORIZED", "Signed out");
    }
    const headers = { Authorization: `Bearer ${token}` };
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

  createUpload(filename) {
    return this.request("POST", "/documents", { filename, content_type: "application/pdf" });
  }

  retry(id) {
    return this.request("POST", `/documents/${encodeURIComponent(id)}/retry`);
  }

  remove(id) {
    return this.request("DELETE", `/documents/${encodeURIComponent(id)}`);
  }

  download(id) {
    return this.request("GET", `/documents/${encodeURIComponent(id)}/download`);
  }

  search(query, mode, k = 5) {
    return this.request("POST", "/search", { query, mode, k });
  }
}
