// Search: the space's records that match a query (SearchRecords), newest first, a page at
// a time ("More" reads the next). Each hit shows its session's label, the record's seq
// and role, and its snippet with the matched words marked (the offsets the gateway gives,
// in code points: the text is never parsed as HTML); a hit opens its session at the record.

import { call } from "./api.js";
import { el, replace, userText } from "./dom.js";

const PAGE_SIZE = 20;

/**
 * A hit of /api/search (SearchRecords').
 * @typedef {object} Hit
 * @property {string} session_id
 * @property {string} label
 * @property {number} seq
 * @property {string} role
 * @property {string} snippet
 * @property {number} snippet_offset
 * @property {[number, number][]} matches code points [start, end) of the matched words
 * @property {number} reader_count
 */

/**
 * The snippet as text nodes with <mark>s, cut by code points (not UTF-16 units).
 * @param {Hit} hit
 */
export function marked(hit) {
  const points = Array.from(hit.snippet);
  /** @type {(string | HTMLElement)[]} */
  const parts = [];
  let at = 0;
  for (const [start, end] of hit.matches) {
    parts.push(points.slice(at, start).join(""));
    parts.push(el("mark", {}, points.slice(start, end).join("")));
    at = end;
  }
  parts.push(points.slice(at).join(""));
  return [hit.snippet_offset ? "…" : "", ...parts];
}

export class SearchView {
  /**
   * @param {HTMLElement} container
   * @param {import("./app.js").App} app
   * @param {string} query
   */
  constructor(container, app, query) {
    this.container = container;
    this.app = app;
    this.query = query;
    /** @type {Hit[]} */
    this.hits = [];
    this.next = "";
  }

  async show() {
    await this.more("");
  }

  /** @param {string} token */
  async more(token) {
    const params = new URLSearchParams({ q: this.query, page_size: String(PAGE_SIZE), page_token: token });
    const page = await call("GET", `/api/search?${params}`);
    if (this.app.view !== this) return;
    this.hits.push(...page.hits);
    this.next = page.next_page_token;
    this.draw();
  }

  /** @param {Hit} hit */
  item(hit) {
    return el(
      "li",
      {
        class: `hit role-${hit.role}`,
        dataset: { session: hit.session_id, seq: String(hit.seq) },
        onclick: () => (location.hash = `#/session/${hit.session_id}/at/${hit.seq}`),
      },
      el(
        "div",
        { class: "hit-head" },
        // A link, so a hit opens by keyboard too (the whole item takes the mouse's click).
        el("a", { href: `#/session/${hit.session_id}/at/${hit.seq}` }, el("bdi", { class: "label" }, hit.label || "(no label)")),
        " ",
        el("code", { class: "muted short-id" }, hit.session_id.slice(0, 8)),
        " ",
        el("span", { class: "seq" }, `#${hit.seq}`),
        " ",
        el("span", { class: "role" }, hit.role),
        hit.reader_count > 1 ? el("span", { class: "muted" }, ` · read by ${hit.reader_count} sessions`) : null,
      ),
      el("div", { class: "snippet" }, ...marked(hit)),
    );
  }

  /** "1 record matches", "20+ records match" (a page more to read), "No record matches". */
  /** @param {number} count */
  counted(count) {
    if (!count) return "No record matches";
    return count === 1 && !this.next ? "1 record matches" : `${count}${this.next ? "+" : ""} records match`;
  }

  draw() {
    const count = this.hits.length;
    replace(
      this.container,
      el("h2", {}, "Search"),
      el("p", { class: "muted", id: "search-count" }, this.counted(count), " “", userText(this.query), count ? "”" : "”."),
      el("ol", { class: "hits", id: "hits" }, this.hits.map((hit) => this.item(hit))),
      this.next
        ? el("button", { type: "button", id: "search-more", onclick: () => this.more(this.next).then(() => this.app.clearError(), (/** @type {unknown} */ error) => this.app.reportError(error)) }, "More")
        : null,
    );
  }
}
