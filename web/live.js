// The live status channel: Server-Sent Events (local stack) or an API Gateway WebSocket (AWS),
// one message shape {"type": "document.updated", "document": {...}}. When the channel drops, the
// page polls instead (onState("polling")) and reconnects with exponential backoff and jitter.

export const LIVE_MESSAGE = "document.updated";
const BACKOFF_START_MS = 1000;
const BACKOFF_MAX_MS = 30_000;

export class LiveChannel {
  /**
   * @param {{kind: "sse"|"websocket", url: string}} config
   * @param {() => string|null} tokenProvider
   * @param {{onDocument: (doc: object) => void, onState: (state: string) => void}} handlers
   */
  constructor(config, tokenProvider, handlers) {
    this.config = config;
    this.tokenProvider = tokenProvider;
    this.handlers = handlers;
    this.source = null;
    this.retryTimer = null;
    this.backoffMs = BACKOFF_START_MS;
    this.stopped = true;
    this.stats = { state: "off", connects: 0, messages: 0, errors: 0 };
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.closeSource();
    this.setState("off");
  }

  setState(state) {
    this.stats.state = state;
    this.handlers.onState(state);
  }

  url() {
    const token = this.tokenProvider();
    if (!token) return null;
    const url = new URL(this.config.url, window.location.href);
    url.searchParams.set("token", token);
    return url.toString();
  }

  connect() {
    if (this.stopped) return;
    const url = this.url();
    if (!url) return;
    this.closeSource();
    this.setState("connecting");
    if (this.config.kind === "websocket") this.openWebSocket(url);
    else this.openEventSource(url);
  }

  openEventSource(url) {
    const source = new EventSource(url);
    this.source = source;
    source.addEventListener("open", () => this.opened());
    source.addEventListener(LIVE_MESSAGE, (event) => this.received(event.data));
    // EventSource retries by itself, but not after an HTTP error, and a dropped stream loses
    // messages: take over (poll, then reconnect with backoff) either way.
    source.addEventListener("error", () => this.dropped(source));
  }

  openWebSocket(url) {
    const socket = new WebSocket(url);
    this.source = socket;
    socket.addEventListener("open", () => this.opened());
    socket.addEventListener("message", (event) => this.received(event.data));
    socket.addEventListener("close", () => this.dropped(socket));
  }

  opened() {
    this.backoffMs = BACKOFF_START_MS;
    this.stats.connects += 1;
    this.setState("live");
  }

  received(data) {
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      return;
    }
    if (message?.type !== LIVE_MESSAGE || typeof message.document !== "object" || message.document === null) return;
    this.stats.messages += 1;
    this.handlers.onDocument(message.document);
  }

  dropped(source) {
    if (source !== this.source) return; // an old channel closing late
    this.stats.errors += 1;
    this.closeSource();
    if (this.stopped) return;
    this.setState("polling");
    const delay = this.backoffMs / 2 + Math.random() * (this.backoffMs / 2);
    this.backoffMs = Math.min(this.backoffMs * 2, BACKOFF_MAX_MS);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  closeSource() {
    const source = this.source;
    this.source = null;
    if (source) source.close();
  }
}
