// The console's JSON endpoints and its server-sent-events streams. A deployed console
// sends the key the user entered (kept in sessionStorage, never in a URL) in a header;
// the local console of `stello up` signs in with its cookie and its page key: the cookie
// reaches every server of this host (cookies ignore ports), so it does not suffice alone;
// the page key, handed to the page that opened the printed URL, stays in this origin's
// localStorage (an origin has its port) and goes in a header with each call.

const KEY = "stello_console.key";
const SPACE = "stello_console.space";
const PAGE_KEY = "stello_console.page_key";
// The guard's answer to a request whose sign-in cookie is no longer valid (the console's
// token was renewed): the page stops and says what to do.
const SIGNED_OUT = "CONSOLE_SIGNED_OUT";
let keyMode = false;
/** @type {((error: ApiError) => void) | null} */
let signedOutHandler = null;
/** @type {((error: ApiError) => void) | null} */
let keyRefusedHandler = null;

/** An error the gateway (or the console) answered: its code and message. */
export class ApiError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {string | null} reason
   */
  constructor(code, message, reason = null) {
    super(message);
    this.code = code;
    this.reason = reason;
  }

  toString() {
    return `${this.code}: ${this.message}`;
  }
}

/** `handler(error)` runs when the console says this tab's sign-in is no longer valid. */
/** @param {(error: ApiError) => void} handler */
export function onSignedOut(handler) {
  signedOutHandler = handler;
}

/** `handler(error)` runs when the gateway refuses a deployed console's key (revoked, or a
 * space it does not reach) on any call: the tab asks for a key again. */
/** @param {(error: ApiError) => void} handler */
export function onKeyRefused(handler) {
  keyRefusedHandler = handler;
}

/** The page that opened the printed URL: keep the page key its answer carries (every tab
 * of this browser on this console reads it), and drop the token from the address. */
export function takePageKey() {
  const meta = document.querySelector('meta[name="stello-page-key"]');
  if (!(meta instanceof HTMLMetaElement)) return;
  localStorage.setItem(PAGE_KEY, meta.content);
  meta.remove();
  const url = new URL(location.href);
  url.searchParams.delete("token");
  history.replaceState(null, "", url);
}

/** "key": requests carry the key from sessionStorage; "local": the cookie and the page key. */
/** @param {string} mode */
export function setMode(mode) {
  keyMode = mode === "key";
}

export function signedIn() {
  return !keyMode || Boolean(sessionStorage.getItem(KEY) && sessionStorage.getItem(SPACE));
}

/**
 * @param {string} key
 * @param {string} spaceId
 */
export function signIn(key, spaceId) {
  sessionStorage.setItem(KEY, key.trim());
  sessionStorage.setItem(SPACE, spaceId.trim());
}

export function signOut() {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(SPACE);
}

/** Forget this tab's sign-in: a deployed console's key (this tab only), or, for the local
 * console, the browser's cookie, which the console expires (every tab of this browser). */
export async function forget() {
  if (keyMode) signOut();
  else {
    await call("POST", "/api/sign-out");
    localStorage.removeItem(PAGE_KEY);
  }
}

/** Who this tab is signed in as, for the tabs that share one live stream: the local
 * console's cookie is the browser's; a key is named by a digest, never itself. "" when the
 * browser cannot digest (not a secure context): the tab then reads its own stream. */
export async function identity() {
  if (!keyMode) return "local";
  if (!crypto.subtle) return "";
  const text = new TextEncoder().encode(`${sessionStorage.getItem(SPACE)}\n${sessionStorage.getItem(KEY)}`);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", text));
  return [...digest].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

export function space() {
  return sessionStorage.getItem(SPACE);
}

/**
 * @param {boolean} json
 * @param {Record<string, string>} [extra]
 * @returns {Record<string, string>}
 */
function headers(json, extra = {}) {
  /** @type {Record<string, string>} */
  const result = { ...extra };
  if (json) result["content-type"] = "application/json";
  if (keyMode) {
    result.authorization = `Bearer ${sessionStorage.getItem(KEY) || ""}`;
    result["x-stello-space"] = sessionStorage.getItem(SPACE) || "";
  } else {
    result["x-stello-page"] = localStorage.getItem(PAGE_KEY) || "";
  }
  return result;
}

/**
 * @param {string} method
 * @param {string} path
 * @param {unknown} body
 * @param {{headers?: Record<string, string>, signal?: AbortSignal}} [options]
 */
async function request(method, path, body, { headers: extra, signal } = {}) {
  try {
    return await fetch(path, {
      method,
      headers: headers(body !== undefined, extra),
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
      signal,
    });
  } catch (error) {
    if (signal?.aborted) throw error;
    throw new ApiError("UNAVAILABLE", "the console did not answer: is it still running?");
  }
}

/**
 * @param {Response} response
 * @returns {Promise<any>}
 */
async function answer(response) {
  const type = response.headers.get("content-type") || "";
  if (type.startsWith("application/json")) {
    const data = await response.json();
    if (response.ok) return data;
    const error = data.error || {};
    const failure = new ApiError(error.code || String(response.status), error.message || "", error.reason);
    refused(failure);
    throw failure;
  }
  const text = (await response.text()).trim();
  if (!response.ok) throw new ApiError(String(response.status), text || response.statusText);
  return text;
}

/** Run the handler a refused sign-in calls for (the console's sign-out, a deployed
 * console's refused key) when `failure` is one: a call's answer, or the live stream's end. */
/** @param {ApiError} failure */
export function refused(failure) {
  if (failure.reason === SIGNED_OUT) signedOutHandler?.(failure);
  else if (keyMode && keyRefused(failure)) keyRefusedHandler?.(failure);
}

/** The live stream refused a deployed console's key: a call of this tab's asks for a key
 * again with the gateway's words for this key (the watch's speak of a stream and its cursor:
 * "the API key of this stream was revoked; watch again ..."); the stream's `failure` when the
 * call is not refused. The local console's refusal is handled as any other. */
/** @param {ApiError} failure */
export async function refusedOnStream(failure) {
  if (keyMode) {
    try {
      await call("GET", "/api/space");
    } catch (error) {
      if (error instanceof ApiError && keyRefused(error)) return; // answer() asked already
    }
  }
  refused(failure);
}

/** Whether a deployed console's call failed for its key: refused by the gateway, or a
 * space the key does not reach (the sign-in form's fields to fix). */
/** @param {ApiError} error */
export function keyRefused(error) {
  return error.code === "UNAUTHENTICATED" || error.reason === "SIGN_IN";
}

/**
 * One JSON call; throws ApiError with the gateway's message when it fails.
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<any>} the answer's JSON
 */
export async function call(method, path, body) {
  return answer(await request(method, path, body));
}

/**
 * Send the request (POST `body` unless `options.method` says otherwise), then call
 * `onEvent(name, data, id)` for each server-sent event until the stream ends; comments
 * (heartbeats) are skipped. `options.headers` and `options.signal` go to fetch.
 * @param {string} path
 * @param {unknown} body
 * @param {(name: string, data: any, id: string | null) => void} onEvent
 * @param {{method?: string, headers?: Record<string, string>, signal?: AbortSignal}} options
 */
export async function stream(path, body, onEvent, options = {}) {
  const response = await request(options.method || "POST", path, body, options);
  if (!response.ok) await answer(response);
  const bytes = /** @type {ReadableStream<Uint8Array<ArrayBuffer>>} */ (response.body);
  const reader = bytes.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = null;
      let id = null;
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
        else if (line.startsWith("id: ")) id = line.slice(4);
      }
      if (name !== null) onEvent(name, data ? JSON.parse(data) : null, id);
    }
  }
}

/** A fresh idempotency key for a mutating call (a retry of the same click reuses it). */
export function requestId() {
  return crypto.randomUUID();
}
