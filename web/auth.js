// Sign-in. Local stack: a dev-only form that asks the local identity provider for an ID token.
// AWS: Cognito managed login, authorization code + PKCE (the verifier and state live in
// sessionStorage between the redirect and the callback). The ID token is kept in sessionStorage
// (gone when the tab closes) and dropped when it expires.

const SESSION_KEY = "rag-ingest.session";
const PKCE_KEY = "rag-ingest.pkce";
const EXPIRY_MARGIN_MS = 10_000;

export class AuthError extends Error {}

function base64UrlEncode(bytes) {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function base64UrlDecode(text) {
  const padded = text.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(text.length / 4) * 4, "=");
  return Uint8Array.from(atob(padded), (char) => char.charCodeAt(0));
}

/** The claims of a JWT (not verified here: the API verifies every request). */
export function decodeClaims(token) {
  const parts = String(token).split(".");
  if (parts.length !== 3) throw new AuthError("the token is not a JWT");
  const claims = JSON.parse(new TextDecoder().decode(base64UrlDecode(parts[1])));
  if (typeof claims !== "object" || claims === null) throw new AuthError("the token has no claims");
  return claims;
}

function randomString(byteCount = 32) {
  return base64UrlEncode(crypto.getRandomValues(new Uint8Array(byteCount)));
}

async function pkceChallenge(verifier) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64UrlEncode(new Uint8Array(digest));
}

export class Auth {
  constructor(config, storage = window.sessionStorage) {
    this.config = config;
    this.storage = storage;
    this.expiryTimer = null;
    this.onSignedOut = () => {};
  }

  get kind() {
    return this.config.kind;
  }

  /** The current session {token, claims} or null (expired or absent). */
  session() {
    let stored;
    try {
      stored = JSON.parse(this.storage.getItem(SESSION_KEY) || "null");
    } catch {
      stored = null;
    }
    if (!stored || typeof stored.token !== "string") return null;
    let claims;
    try {
      claims = decodeClaims(stored.token);
    } catch {
      this.clear();
      return null;
    }
    if (!Number.isFinite(claims.exp) || claims.exp * 1000 - EXPIRY_MARGIN_MS <= Date.now()) {
      this.clear();
      return null;
    }
    return { token: stored.token, claims };
  }

  token() {
    return this.session()?.token ?? null;
  }

  store(token) {
    const claims = decodeClaims(token);
    this.storage.setItem(SESSION_KEY, JSON.stringify({ token }));
    this.watchExpiry(claims);
    return { token, claims };
  }

  clear() {
    this.storage.removeItem(SESSION_KEY);
    clearTimeout(this.expiryTimer);
  }

  /** Sign out by itself when the token expires (the API would answer 401 from then on). */
  watchExpiry(claims) {
    clearTimeout(this.expiryTimer);
    const remaining = claims.exp * 1000 - EXPIRY_MARGIN_MS - Date.now();
    // setTimeout's limit is ~24.8 days; tokens live an hour.
    this.expiryTimer = setTimeout(() => this.expire(), Math.max(0, Math.min(remaining, 2 ** 31 - 1)));
  }

  expire() {
    this.clear();
    this.onSignedOut("Your session expired. Sign in again.");
  }

  /** Local stack only: a token for any user and tenant (dev-only endpoint). */
  async signInLocal(username, tenantId) {
    const response = await fetch(this.config.tokenUrl, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ username, tenant_id: tenantId }),
    });
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    if (!response.ok || !body?.id_token) {
      const message = body?.error?.message || body?.message || `sign-in failed (${response.status})`;
      throw new AuthError(message);
    }
    return this.store(body.id_token);
  }

  /** Cognito: redirect to the managed login with a PKCE challenge and a state. */
  async beginCognitoSignIn() {
    const verifier = randomString(48);
    const state = randomString(24);
    this.storage.setItem(PKCE_KEY, JSON.stringify({ verifier, state }));
    const url = new URL("/oauth2/authorize", this.config.domain);
    url.search = new URLSearchParams({
      response_type: "code",
      client_id: this.config.clientId,
      redirect_uri: this.config.redirectUri,
      scope: (this.config.scopes || ["openid", "email", "profile"]).join(" "),
      state,
      code_challenge: await pkceChallenge(verifier),
      code_challenge_method: "S256",
    }).toString();
    window.location.assign(url.toString());
  }

  /** Cognito callback (?code&state): check the state, exchange the code with the verifier. */
  async completeCognitoSignIn(location = window.location) {
    const params = new URLSearchParams(location.search);
    if (!params.has("code") && !params.has("error")) return null;
    const pending = JSON.parse(this.storage.getItem(PKCE_KEY) || "null");
    this.storage.removeItem(PKCE_KEY);
    // The code and state must not stay in the address bar or the history.
    window.history.replaceState(null, "", location.pathname + location.hash);
    if (params.has("error")) {
      throw new AuthError(`sign-in was refused: ${params.get("error_description") || params.get("error")}`);
    }
    if (!pending || !pending.state || pending.state !== params.get("state")) {
      throw new AuthError("sign-in state did not match; start again");
    }
    const response = await fetch(new URL("/oauth2/token", this.config.domain), {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        client_id: this.config.clientId,
        code: params.get("code"),
        redirect_uri: this.config.redirectUri,
        code_verifier: pending.verifier,
      }),
    });
    const body = await response.json().catch(() => null);
    if (!response.ok || !body?.id_token) {
      throw new AuthError(`token exchange failed: ${body?.error || response.status}`);
    }
    return this.store(body.id_token);
  }

  signOut() {
    this.clear();
    if (this.kind === "cognito") {
      const url = new URL("/logout", this.config.domain);
      url.search = new URLSearchParams({
        client_id: this.config.clientId,
        logout_uri: this.config.logoutUri || this.config.redirectUri,
      }).toString();
      window.location.assign(url.toString());
      return;
    }
    this.onSignedOut("");
  }
}

/** Who is signed in, from the ID token's claims. */
export function identityOf(claims) {
  return {
    username: claims["cognito:username"] || claims.email || claims.sub || "unknown",
    tenant: claims["custom:tenant_id"] || "",
    email: claims.email || "",
  };
}
