// Digests: every session's label, status, turns, memory and insight as a table,
// one page at a time (ListSessionDigests' page tokens), filtered by status. A batch of
// live changes that touch what the table shows re-reads the page on screen (one call).

import { call } from "./api.js";
import { el, replace } from "./dom.js";

const PAGE_SIZE = 50;
const SHOWN_KINDS = new Set([
  "session_committed",
  "session_updated",
  "session_archived",
  "session_unarchived",
  "subtree_deleted",
  "turn_committed",
  "insight_put",
  "insight_cleared",
  "memory_put",
]);

export class DigestsView {
  /**
   * @param {HTMLElement} container
   * @param {import("./app.js").App} app
   */
  constructor(container, app) {
    this.container = container;
    this.app = app;
    this.status = "";
    this.tokens = [""]; // the token of each page seen so far; the last is the current one
    this.next = "";
  }

  async show() {
    const token = this.tokens[this.tokens.length - 1];
    const query = new URLSearchParams({ status: this.status, page_size: String(PAGE_SIZE), page_token: token });
    const page = await call("GET", `/api/digests?${query}`);
    if (this.app.view !== this) return;
    this.next = page.next_page_token;
    this.draw(page.digests);
  }

  /** @param {{kind: string}[]} events */
  async onEvents(events) {
    if (events.some((event) => SHOWN_KINDS.has(event.kind))) await this.show();
  }

  /** @param {() => void} change */
  async go(change) {
    change();
    try {
      await this.show();
      this.app.clearError();
    } catch (error) {
      this.app.reportError(error);
    }
  }

  /**
   * @param {{id: string, label: string, status: string, turn_count: number, memory: string | null, insight: string | null}[]} digests
   */
  draw(digests) {
    const filter = el(
      "select",
      {
        id: "digest-status",
        "aria-label": "Show sessions of status",
        onchange: (/** @type {Event} */ event) => this.go(() => {
          this.status = /** @type {HTMLSelectElement} */ (event.target).value;
          this.tokens = [""];
        }),
      },
      ["", "active", "archived"].map((value) =>
        el("option", { value, selected: value === this.status }, value || "all statuses"),
      ),
    );
    const rows = digests.map((digest) =>
      el(
        "tr",
        { class: digest.status === "archived" ? "archived" : null, dataset: { id: digest.id }, onclick: () => this.app.open(digest.id) },
        // The label is a link: the row's click is for the mouse, the link for the keyboard.
        el("td", {}, el("a", { href: `#/session/${digest.id}`, class: "user-text", dir: "auto" }, digest.label || "(no label)")),
        el("td", {}, digest.status),
        el("td", { class: "number" }, String(digest.turn_count)),
        el("td", { class: "text-cell" }, digest.memory ?? ""),
        el("td", { class: "text-cell" }, digest.insight ?? ""),
        el("td", {}, el("code", { class: "short-id" }, digest.id.slice(0, 8))),
      ),
    );
    const page = this.tokens.length;
    replace(
      this.container,
      el("h2", {}, "Digests"),
      el(
        "div",
        { class: "actions" },
        filter,
        el("button", { type: "button", id: "digest-prev", disabled: page === 1, onclick: () => this.go(() => this.tokens.pop()) }, "‹ Previous"),
        el("span", { class: "muted", id: "digest-page" }, `page ${page}`),
        el("button", { type: "button", id: "digest-next", disabled: !this.next, onclick: () => this.go(() => this.tokens.push(this.next)) }, "Next ›"),
      ),
      el(
        "div",
        { class: "table-scroll" }, // a narrow screen scrolls the table, not the page
        el(
          "table",
          { class: "digests", id: "digests" },
          el("thead", {}, el("tr", {}, ["Label", "Status", "Turns", "Memory", "Insight", "Id"].map((h) => el("th", {}, h)))),
          el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: "6", class: "muted" }, "No sessions."))),
        ),
      ),
    );
  }
}
