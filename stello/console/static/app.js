// The console page: sign-in when a deployed console needs a key, then the forest beside
// the open view (a session or the digests), chosen by the address's #fragment.

import { ApiError, call, requestId, setMode, signIn, signOut, signedIn, space } from "./api.js";
import { DigestsView } from "./digests.js";
import { dialog, el, replace } from "./dom.js";
import { Forest } from "./forest.js";
import { showLive } from "./live.js";
import { SessionView } from "./session.js";

const $ = (id) => document.getElementById(id);

class App {
  constructor() {
    this.config = null;
    this.tree = null;
    this.view = null;
  }

  async boot() {
    $("error-close").addEventListener("click", () => ($("error").hidden = true));
    try {
      this.config = await call("GET", "/api/config");
    } catch (error) {
      this.reportError(error);
      replace($("detail"), el("p", {}, "The console could not start: see the message above."));
      return;
    }
    setMode(this.config.mode);
    showLive($("live"), this.config);
    if (!signedIn()) this.askKey();
    else await this.start();
  }

  askKey(message = "") {
    for (const id of ["new-root", "refresh", "sign-out"]) $(id).hidden = true;
    replace($("forest-pane"));
    const key = el("input", { id: "sign-in-key", type: "password", required: true, autocomplete: "off" });
    const spaceId = el("input", { id: "sign-in-space", required: true, placeholder: "space id (a UUID)" });
    replace(
      $("detail"),
      el(
        "form",
        {
          class: "sign-in",
          onsubmit: async (event) => {
            event.preventDefault();
            signIn(key.value, spaceId.value);
            await this.start();
          },
        },
        el("h2", {}, "Sign in"),
        el("p", { class: "muted" }, "Your key stays in this tab (sessionStorage) and is sent to this console only."),
        message ? el("p", { class: "error-text" }, message) : null,
        el("label", {}, "API key", key),
        el("label", {}, "Space id", spaceId),
        el("button", { type: "submit", class: "primary", id: "sign-in" }, "Sign in"),
      ),
    );
  }

  async start() {
    $("space").textContent = this.config.space_id || space() || "";
    this.tree = new Forest($("forest-pane"), (id) => this.open(id));
    for (const id of ["new-root", "refresh"]) $(id).hidden = false;
    $("sign-out").hidden = this.config.mode !== "key";
    $("refresh").onclick = () => this.refresh();
    $("new-root").onclick = () => this.newRoot();
    $("sign-out").onclick = () => {
      signOut();
      location.reload();
    };
    if (await this.refreshForest()) {
      window.addEventListener("hashchange", () => this.route());
      await this.route();
    }
  }

  forest() {
    return this.tree;
  }

  /** Reload the forest; false when it failed (the error is shown). */
  async refreshForest() {
    try {
      const { nodes } = await call("GET", "/api/tree");
      this.tree.load(nodes);
      return true;
    } catch (error) {
      if (error instanceof ApiError && error.code === "UNAUTHENTICATED" && this.config.mode === "key") {
        signOut();
        this.askKey(error.message);
        return false;
      }
      this.reportError(error);
      return false;
    }
  }

  async refresh() {
    if (await this.refreshForest()) await this.route();
  }

  open(id) {
    const target = id ? `#/session/${id}` : "#/";
    if (location.hash === target) this.route();
    else location.hash = target;
  }

  reopen() {
    return this.route();
  }

  async route() {
    const hash = location.hash;
    const detail = $("detail");
    $("nav-digests").classList.toggle("current", hash === "#/digests");
    $("nav-forest").classList.toggle("current", hash !== "#/digests");
    try {
      if (hash.startsWith("#/session/")) {
        const id = decodeURIComponent(hash.slice("#/session/".length));
        this.tree.select(id);
        this.view = new SessionView(detail, this, id);
        await this.view.show();
      } else if (hash === "#/digests") {
        this.view = new DigestsView(detail, this);
        await this.view.show();
      } else {
        this.view = null;
        this.tree.select(null);
        replace(detail, el("div", { class: "welcome muted" }, el("h2", {}, "Stello"), el("p", {}, "Pick a session in the forest, or create a root.")));
      }
    } catch (error) {
      this.reportError(error);
      replace(detail, el("p", { class: "error-text", id: "view-error" }, String(error)));
    }
  }

  async newRoot() {
    const form = await dialog(
      "New root session",
      el(
        "div",
        { class: "fields" },
        el("label", {}, "Label", el("input", { name: "label", id: "root-label", maxlength: "200", placeholder: "Root" })),
        el("label", {}, "System prompt", el("textarea", { name: "system_prompt", id: "root-system-prompt", rows: 3 })),
      ),
      "Create",
    );
    if (!form) return;
    const body = { request_id: requestId() };
    if (form.get("label")) body.label = form.get("label");
    if (form.get("system_prompt")) body.system_prompt = form.get("system_prompt");
    try {
      const root = await call("POST", "/api/roots", body);
      await this.refreshForest();
      this.open(root.id);
    } catch (error) {
      this.reportError(error);
    }
  }

  /** Show a failure as its message (never a blank page). */
  reportError(error) {
    $("error-text").textContent = String(error);
    $("error").hidden = false;
  }
}

new App().boot();
