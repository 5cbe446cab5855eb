// The console page: sign-in when a deployed console needs a key, then the forest beside
// the open view (a session or the digests), chosen by the address's #fragment, both kept
// up to date by the space's live changes (live.js): each batch refetches only the nodes
// and the parts of the open view that its events name.

import { ApiError, call, forget, identity, keyRefused, onKeyRefused, onSignedOut, requestId, setMode, signIn, signOut, signedIn, space, takePageKey } from "./api.js";
import { DigestsView } from "./digests.js";
import { SearchView } from "./search.js";
import { closeDialogs, dialog, el, replace, setTitle, userText } from "./dom.js";
import { checkLabel } from "./labels.js";
import { Forest } from "./forest.js";
import { Live } from "./live.js";
import { SessionView } from "./session.js";

/** The page's element `id` (index.html has each one the script names). */
const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
/** The page's <input> `id`. */
const input$ = (/** @type {string} */ id) => /** @type {HTMLInputElement} */ ($(id));
const NODES_PER_CALL = 100;
// A session id (a UUID) or its first digits, as the address may name it: nothing else goes
// into an API path ("../" or "?" would reach other endpoints).
const SESSION_ID = /^[0-9a-f][0-9a-f-]{0,35}$/i;
const FIRST_CONTACT_MS = 5000;
// The hex digits of a session id (a UUID): the Go to id box takes 1 to this many of them.
const ID_DIGITS = 32;
// Events that change a forest node's label, status or turn count: the node is refetched.
const NODE_KINDS = new Set(["session_committed", "session_updated", "turn_committed"]);
// The bar's controls of a signed-in space (hidden on a sign-in form).
const SPACE_CONTROLS = ["new-root", "refresh", "sign-out", "search-form"];
// What "Sign out" covers: a deployed console's key is this tab's (sessionStorage); the local
// console's cookie is the browser's, shared by its tabs.
const SIGN_OUT_TITLE = {
  key: "Forget this tab's key and space (other tabs keep theirs)",
  local: "Sign this browser out of the console (every tab of it)",
};

/**
 * The open view (a session, a search, the digests): what the app calls on it.
 * @typedef {object} View
 * @property {() => Promise<void>} show
 * @property {() => void} [leave]
 * @property {() => void} [forestChanged]
 * @property {(events: any[]) => Promise<void>} [onEvents]
 */

export class App {
  constructor() {
    /** @type {any} */
    this.config = null;
    this.tree = /** @type {Forest} */ (/** @type {unknown} */ (null)); // set by start()
    /** @type {View | null} */
    this.view = null;
    /** @type {Live | null} */
    this.live = null;
    this.routing = false;
    /** @type {string | null} */
    this.routed = null;
    /** @type {Promise<boolean> | null} */
    this.resyncing = null;
    this.out = false;
    this.forestFailed = false;
    this.viewFailed = false;
    this.forestBanner = false;
    /** @type {string | undefined} the address whose view shows (route()) */
    this.shownHash = undefined;
  }

  async boot() {
    // The banner's close button (a button: Tab reaches it, Enter or Space presses it).
    $("error-close").addEventListener("click", () => this.hideError());
    takePageKey();
    try {
      this.config = await call("GET", "/api/config");
    } catch (error) {
      this.reportError(error);
      replace($("detail"), el("p", {}, "The console could not start: see the message above."));
      return;
    }
    setMode(this.config.mode);
    onSignedOut(() => this.signedOut());
    onKeyRefused((error) => this.keyRefused(error));
    window.addEventListener("pagehide", () => this.live?.stop());
    if (!signedIn()) this.askKey();
    else await this.start();
  }

  /** The gateway refused this tab's key (on any call: a dialog's, a view's, a reload's):
   * the tab forgets it and the sign-in form says why, no dialog left over it. */
  /** @param {ApiError} error */
  keyRefused(error) {
    if (!signedIn()) return; // asked already: the first refusal's words stay
    signOut();
    this.askKey(`The gateway refused this sign-in: ${error.message}`);
  }

  askKey(message = "", note = "") {
    this.live?.stop();
    this.clearSpace();
    const key = el("input", { id: "sign-in-key", type: "password", required: true, autocomplete: "off" });
    const spaceId = el("input", { id: "sign-in-space", required: true, placeholder: "space id (a UUID)" });
    replace(
      $("detail"),
      el(
        "form",
        {
          class: "sign-in",
          onsubmit: async (/** @type {SubmitEvent} */ event) => {
            event.preventDefault();
            signIn(key.value, spaceId.value);
            await this.start();
          },
        },
        el("h2", {}, "Sign in"),
        el("p", { class: "muted" }, "Your key stays in this tab (sessionStorage) and is sent to this console only."),
        note ? el("p", { id: "sign-in-note", role: "status" }, note) : null,
        message ? el("p", { class: "error-text" }, message) : null,
        el("label", {}, "API key", key),
        el("label", {}, "Space id", spaceId),
        el("button", { type: "submit", class: "primary", id: "sign-in" }, "Sign in"),
      ),
    );
  }

  async start() {
    this.showSpace(this.config.space_id || space() || "");
    this.tree = new Forest($("forest-pane"), (/** @type {string} */ id) => this.open(id));
    this.tree.addTool(this.goTo());
    for (const id of SPACE_CONTROLS) $(id).hidden = false;
    $("search-form").onsubmit = (event) => {
      event.preventDefault();
      const query = input$("search").value.trim();
      if (query) location.hash = `#/search/${encodeURIComponent(query)}`;
    };
    $("sign-out").title = SIGN_OUT_TITLE[/** @type {"key" | "local"} */ (this.config.mode)] || "";
    $("refresh").onclick = () => this.refresh();
    $("new-root").onclick = () => this.newRoot();
    $("sign-out").onclick = () => this.signOutHere();
    this.live?.stop();
    this.live = new Live($("live"), this, await identity());
    // The state is read once the stream's start is known, so no change falls between them.
    const waited = new Promise((resolve) => {
      setTimeout(() => resolve(false), FIRST_CONTACT_MS);
    });
    const contact = await Promise.race([this.live.start(), waited]);
    if (!contact && signedIn()) await this.resync();
    if (!signedIn()) return; // the key was refused: the sign-in form shows why
    // Navigation follows the address from now on (the first view took it as it was).
    if (!this.routing) {
      window.addEventListener("hashchange", () => this.route());
      this.routing = true;
      if (this.routed !== null && location.hash !== this.routed) await this.route();
    }
  }

  forest() {
    return this.tree;
  }

  /** The bar names the space (its id on hover); the id until the name is known. */
  /** @param {string} id */
  async showSpace(id) {
    const label = $("space");
    label.textContent = id;
    label.title = id;
    try {
      const { name } = await call("GET", "/api/space");
      if (name) label.textContent = name;
    } catch {
      // the id stays: a refused key shows its own message
    }
  }

  /** "Go to session": a whole id, or its first hex digits as the CLI takes them. */
  goTo() {
    const input = el("input", {
      id: "goto-id",
      placeholder: "Go to id…",
      "aria-label": "Go to session by id or its first digits",
      autocomplete: "off",
      spellcheck: false,
    });
    const found = el("div", { class: "goto-found", id: "goto-found", "aria-live": "polite" });
    const form = el(
      "form",
      {
        class: "goto",
        onsubmit: async (/** @type {SubmitEvent} */ event) => {
          event.preventDefault();
          replace(found);
          const text = input.value.trim();
          if (!text) return;
          if (!idStart(text)) {
            replace(found, el("p", { class: "error-text" }, "Go to id: “", userText(text), `” is not a session id nor its start: type 1 to ${ID_DIGITS} of its hex digits (0-9, a-f; hyphens are ignored).`));
            return;
          }
          try {
            const { sessions } = await call("GET", `/api/resolve?${new URLSearchParams({ prefix: text })}`);
            // typed on meanwhile: the answer is for text no longer there, and what was typed stays
            if (input.value.trim() !== text) return;
            if (sessions.length === 1) {
              input.value = "";
              this.open(sessions[0].id);
            } else if (!sessions.length) {
              replace(found, el("p", { class: "error-text" }, "No session id starts with “", userText(text), "”."));
            } else {
              replace(
                found,
                el("p", { class: "muted" }, "Several ids start with “", userText(text), "”:"),
                el(
                  "ul",
                  {},
                  sessions.map((/** @type {{id: string, label: string}} */ s) => el("li", {}, el("a", { href: `#/session/${s.id}`, onclick: () => replace(found) }, userText(s.label), " ", el("code", { class: "short-id" }, s.id.slice(0, 13))))),
                ),
              );
            }
          } catch (error) {
            replace(found, el("p", { class: "error-text" }, (error instanceof Error && error.message) || String(error)));
          }
        },
      },
      input,
      el("button", { type: "submit", id: "goto-go" }, "Go"),
    );
    return el("div", { class: "goto-box" }, form, found);
  }

  /**
   * "Sign out": a reply streaming stops, then a deployed console forgets this tab's key
   * (the sign-in form comes back; other tabs keep theirs), the local one has the console
   * expire this browser's cookie (every tab of it is signed out).
   */
  async signOutHere() {
    this.view?.leave?.();
    this.live?.stop();
    try {
      await forget();
    } catch (error) {
      this.reportError(error);
      return;
    }
    this.hideError();
    if (this.config.mode === "key") {
      this.askKey("", "Signed out: this tab forgot its key. Other tabs keep theirs until they sign out.");
      return;
    }
    this.out = true;
    this.live?.signedOut(); // the other tabs of this browser are signed out too: now, not later
    this.showSignedOut(true);
  }

  /** The console refused this tab's sign-in (a sign-out, or a renewed token): stop, and say
   * how to sign in again. */
  signedOut() {
    if (this.out) return;
    this.out = true;
    this.live?.stop({ code: "UNAUTHENTICATED", message: "signed out" });
    this.showSignedOut(false);
  }

  /** The signed-out page: why (`mine`: this tab's Sign out), and how to sign in again. */
  /** @param {boolean} mine */
  showSignedOut(mine) {
    this.view?.leave?.();
    this.clearSpace();
    this.hideError();
    document.body.dataset.view = "detail";
    const why = mine
      ? el("p", {}, "You signed out: this browser no longer holds the console's sign-in cookie, so every tab of it on this console is signed out (the others say so too).")
      : el("p", {}, "This browser signed out (in this tab or another), or the console's sign-in token was renewed (", el("code", {}, "stello up --new-console-token"), "), so the address this tab opened no longer signs in.");
    replace(
      $("detail"),
      el(
        "section",
        { class: "signed-out", id: "signed-out" },
        el("h2", {}, "This tab is signed out"),
        why,
        el("p", {}, "Open the ", el("code", {}, "console:"), " URL that ", el("code", {}, "stello up"), " printed last (it carries the token), in this tab or a new one, or paste it here."),
        tokenForm(),
      ),
    );
  }

  /** Leave the space for a sign-in form: no dialog over it (one left open would cover it),
   * no view, title or forest, none of the bar's controls of a space. */
  clearSpace() {
    closeDialogs();
    setTitle();
    this.view = null;
    for (const id of SPACE_CONTROLS) $(id).hidden = true;
    replace($("forest-pane"));
  }

  /** Reload the forest and the open view (one at a time); false when the forest failed. */
  async resync() {
    while (this.resyncing) await this.resyncing;
    this.resyncing = this.reload();
    try {
      return await this.resyncing;
    } finally {
      this.resyncing = null;
    }
  }

  /** The live stream is back after a break: reload what failed meanwhile (the forest, the
   * open view), so the page does not stay failed under a "live" badge. */
  async recover() {
    if (this.forestFailed || this.viewFailed) await this.resync();
  }

  async reload() {
    const loaded = await this.refreshForest();
    // A forest that failed to load (too large, say) still lets the address open its view;
    // a refused key has put up the sign-in form instead.
    if (signedIn()) await this.route();
    return loaded;
  }

  /** A batch of live changes: the nodes they name are refetched (deletes and archives need
   * no call), then the open view takes the events that concern it. */
  /** @param {any[]} events */
  async apply(events) {
    const refetch = new Set();
    let changed = false;
    for (const event of events) {
      if (NODE_KINDS.has(event.kind)) refetch.add(event.session_id);
      else if (event.kind === "session_archived" || event.kind === "session_unarchived") {
        const status = event.kind === "session_archived" ? "archived" : "active";
        changed = this.tree.setStatus(event.session_id, status) || changed;
      } else if (event.kind === "subtree_deleted") {
        this.tree.remove(event.session_ids);
        for (const id of event.session_ids) refetch.delete(id);
        changed = true;
      }
    }
    if (refetch.size) await this.refreshNodes([...refetch]);
    else if (changed) this.tree.changed();
    if (refetch.size || changed) this.view?.forestChanged?.();
    await this.view?.onEvents?.(events);
  }

  /** Refetch these sessions' forest nodes (a hundred a call); gone ones leave the forest. */
  /** @param {string[]} ids */
  async refreshNodes(ids) {
    for (let start = 0; start < ids.length; start += NODES_PER_CALL) {
      const query = new URLSearchParams(ids.slice(start, start + NODES_PER_CALL).map((id) => ["id", id]));
      const { nodes, missing } = await call("GET", `/api/nodes?${query}`);
      for (const node of nodes) this.tree.upsert(node);
      this.tree.remove(missing);
    }
    this.tree.changed();
  }

  /** Reload the forest; false when it failed (the error is shown). */
  async refreshForest() {
    try {
      const { nodes } = await call("GET", "/api/tree");
      this.tree.load(nodes);
      if (this.forestFailed) this.hideError(); // its banner is past
      this.forestFailed = false;
      return true;
    } catch (error) {
      // A refused key, or a space it does not reach: the sign-in form says why.
      if (error instanceof ApiError && keyRefused(error) && this.config.mode === "key") {
        this.keyRefused(error);
        return false;
      }
      this.forestFailed = true;
      this.tree.failed(error);
      this.reportError(error, { forest: true });
      return false;
    }
  }

  async refresh() {
    await this.resync();
  }

  /** @param {string | null} id */
  open(id) {
    const target = id ? `#/session/${id}` : "#/";
    if (location.hash === target) this.route();
    else location.hash = target;
  }

  reopen() {
    return this.route();
  }

  async route() {
    if (this.out || !signedIn()) return;
    const hash = location.hash;
    this.routed = hash;
    const detail = $("detail");
    /** @type {View | null} */
    let view = null;
    // One column on a narrow screen: the forest, or the open view (the bar goes between).
    const detailed = hash.startsWith("#/session/") || hash.startsWith("#/search/") || hash === "#/digests";
    document.body.dataset.view = detailed ? "detail" : "forest";
    markCurrent($("nav-forest"), !detailed);
    markCurrent($("nav-digests"), hash === "#/digests");
    if (hash !== this.shownHash) {
      setTitle(); // a session's view names it once loaded
      detail.scrollTop = 0; // another view starts at its top
      this.clearError(); // an earlier view's failure, or an action's in it, is not this one's
    }
    this.shownHash = hash;
    let path = null;
    try {
      path = decodeURIComponent(hash);
    } catch {
      // a malformed %-escape: said below, like an address naming no session
    }
    const [id, at] = path?.startsWith("#/session/") ? path.slice("#/session/".length).split("/at/") : [];
    const bad = badAddress(path, id);
    if (bad) {
      this.clearError(); // the view says what is wrong; an earlier view's banner is stale
      this.view = null;
      this.tree.select(null);
      document.body.dataset.view = "detail";
      replace(detail, el("p", { class: "error-text", id: "view-error" }, `${bad}. `, el("a", { href: "#/" }, "Back to the forest")));
      return;
    }
    if (hash.startsWith("#/session/")) {
      // #/session/ID, or #/session/ID/at/SEQ: opened at that record (a search hit).
      this.tree.select(id);
      view = new SessionView(detail, this, id, at === undefined ? null : at);
    } else if (hash.startsWith("#/search/")) {
      const query = /** @type {string} */ (path).slice("#/search/".length); // not null: `bad` said so
      input$("search").value = query;
      view = new SearchView(detail, this, query);
    } else if (hash === "#/digests") {
      view = new DigestsView(detail, this);
    } else {
      this.tree.select(null);
      replace(detail, el("div", { class: "welcome muted" }, el("h2", {}, "Stello"), el("p", {}, "Pick a session in the forest, or create a root.")));
    }
    this.view = view;
    if (!view) return;
    try {
      await view.show();
      if (this.view === view && this.viewFailed) this.clearError(); // the last view's failure is past
    } catch (error) {
      if (this.view !== view) return; // the page moved on meanwhile
      this.reportError(error);
      this.viewFailed = true;
      replace(detail, el("p", { class: "error-text", id: "view-error" }, String(error)));
    }
  }

  /** A new root; a refused one keeps the dialog open with what was typed, saying why. */
  async newRoot() {
    const root = await dialog(
      "New root session",
      el(
        "div",
        { class: "fields" },
        el("label", {}, "Label", el("input", { name: "label", id: "root-label", placeholder: "Root" })),
        el("label", {}, "System prompt", el("textarea", { name: "system_prompt", id: "root-system-prompt", rows: 3 })),
      ),
      "Create",
      { act: (form) => createRoot(form) },
    );
    if (!root) return;
    this.clearError();
    try {
      await this.refreshNodes([root.id]);
    } catch (error) {
      this.reportError(error);
    }
    this.open(root.id);
  }

  /**
   * A later success, or another view: the banner of an earlier failure goes, but not the
   * forest's (the forest pane still says it failed; its next load takes the banner away).
   */
  clearError() {
    this.viewFailed = false;
    if (!this.forestBanner) this.hideError();
  }

  /** Hide the banner, whatever it says (its close button, a load that is past it). */
  hideError() {
    this.forestBanner = false;
    $("error").hidden = true;
  }

  /** Show a failure as its message (never a blank page); `forest`: the forest's load. */
  /**
   * @param {unknown} error
   * @param {{forest?: boolean}} [options]
   */
  reportError(error, { forest = false } = {}) {
    if (this.out) return; // the signed-out page says it all
    this.forestBanner = forest;
    $("error-text").textContent = String(error);
    $("error").hidden = false;
  }
}

/** Whether `text` can be a session id or its start, as /api/resolve takes it: 1 to 32 hex
 * digits, hyphens ignored, any case. */
/** @param {string} text */
function idStart(text) {
  const digits = text.replaceAll("-", "");
  return digits.length > 0 && digits.length <= ID_DIGITS && /^[0-9a-f]+$/i.test(digits);
}

/** Create the root the new-root dialog's fields ask for (a label checked as the gateway
 * counts it first).
 * @param {FormData} form
 */
function createRoot(form) {
  /** @type {Record<string, unknown>} */
  const body = { request_id: requestId() };
  if (form.get("label")) body.label = form.get("label");
  if (form.get("system_prompt")) body.system_prompt = form.get("system_prompt");
  checkLabel(form.get("label"));
  return call("POST", "/api/roots", body);
}

/** The local console's sign-in form: the printed URL (or its token) is opened, as if typed. */
function tokenForm() {
  const input = el("input", { id: "sign-in-url", type: "password", required: true, autocomplete: "off", spellcheck: false });
  return el(
    "form",
    {
      class: "token-sign-in",
      onsubmit: (/** @type {SubmitEvent} */ event) => {
        event.preventDefault();
        const token = launchToken(input.value);
        if (token) location.assign(`/?${new URLSearchParams({ token })}${location.hash}`);
      },
    },
    el("label", {}, "Console URL or token", input),
    el("button", { type: "submit", class: "primary", id: "sign-in" }, "Sign in"),
  );
}

/**
 * What is wrong with the address (its decoded `path`, null when it did not decode; `id`, the
 * session it names), or null when nothing is.
 * @param {string | null} path
 * @param {string | undefined} id
 */
function badAddress(path, id) {
  if (path === null) return "This address is not valid (a malformed %-escape in it)";
  if (path.startsWith("#/session/") && !id) return "This address names no session (#/session/ needs its id)";
  if (id !== undefined && !SESSION_ID.test(id)) return "This address names no session (a session id is hex digits and hyphens)";
  if (path.startsWith("#/search/") && !path.slice("#/search/".length).trim()) return "This address names no search (#/search/ needs words to look for)";
  return null;
}

/** The token of a pasted console URL, or the text itself when it is no URL. */
/** @param {string} text */
function launchToken(text) {
  const value = text.trim();
  try {
    return new URL(value).searchParams.get("token") || "";
  } catch {
    return value;
  }
}

new App().boot();

/**
 * Marks a bar link as the page shown (highlighted, aria-current), or not: the forest marks
 * Forest, digests Digests; search and a session's view are neither link's page.
 * @param {HTMLElement} link
 * @param {boolean} shown
 */
function markCurrent(link, shown) {
  link.classList.toggle("current", shown);
  if (shown) link.setAttribute("aria-current", "page");
  else link.removeAttribute("aria-current");
}
