// The live status channel: API Gateway's WebSocket API (served locally in the same shape), messages
// {"type": "document.updated", "document": {...}} and answers' "answer.*" events (onAnswer). When it
// drops, the page polls (onState("polling")) and reconnects with exponential backoff and jitter.

export const LIVE_MESSAGE = "document.updated";
const BACKOFF_START_MS = 1000;
const BACKOFF_MAX_MS = 30_000;

export class LiveChannel {
  /**
   * @param {{kind: "websocket", url: string}} config
   * @param {() => string|null} tokenProvider
   * @param {{onDocument: (doc: object) => void, onState: (state: string) => void, onAnswer?: (event: object) => void}} handlers
   */
  constructor(config, tokenProvider, handlers) {
    this.config = config;
    this.tokenProvider = tokenProvider;
    this.handlers = handlers;
    this.socket = null;
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
    this.closeSocket();
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
    this.closeSocket();
    this.setState("connecting");
    const socket = new WebSocket(url);
    this.socket = socket;
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
    if (String(message?.type).startsWith("answer.")) return this.handlers.onAnswer?.(message);
    if (message?.type !== LIVE_MESSAGE || typeof message.document !== "object" || message.document === null) return;
    this.stats.messages += 1;
    this.handlers.onDocument(message.document);
  }

  /** Sends ``message`` if the channel is open, else false. */
  send(message) {
    if (this.socket?.readyState !== WebSocket.OPEN) return false;
    this.socket.send(JSON.stringify(message));
    return true;
  }

  dropped(socket) {
    if (socket !== this.socket) return; // an old socket closing late
    this.stats.errors += 1;
    this.closeSocket();
    if (this.stopped) return;
    this.setState("polling");
    const delay = this.backoffMs / 2 + Math.random() * (this.backoffMs / 2);
    this.backoffMs = Math.min(this.backoffMs * 2, BACKOFF_MAX_MS);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  closeSocket() {
    const socket = this.socket;
    this.socket = null;
    if (socket) socket.close();
  }
}
