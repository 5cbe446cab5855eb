// A session's lineage, read from the gateway's GetLineage page by page (never from the
// loaded forest, which may not hold the ancestors: a deep link, a lazily expanded forest).
// The first page shows the nearest ancestors; when the chain goes on, a button reads the
// next page up (each request one bounded page). Drawn root first, nearest last, then the
// session itself; each ancestor with its status (archived dimmed), turn count, and its
// memory and insight in collapsed details, as text only.

import { call } from "./api.js";
import { el, plural } from "./dom.js";

/** Ancestors asked for per request. */
export const LINEAGE_PAGE = 20;
// The endpoint's largest page (GetLineage's bound): a reload asks for at most this many.
const MAX_PAGE = 1000;

/**
 * An ancestor as GetLineage gives it.
 * @typedef {object} Ancestor
 * @property {string} id
 * @property {string} label
 * @property {string} status
 * @property {number} turn_count
 * @property {string | null} [memory]
 * @property {string | null} [insight]
 */

export class Lineage {
  /**
   * `id`: the session; its ancestors come from /api/sessions/ID/lineage.
   * @param {string} id
   */
  constructor(id) {
    this.path = `/api/sessions/${id}/lineage`;
    /** @type {Ancestor[]} */
    this.ancestors = []; // nearest first, as the pages came
    this.token = "";
    this.read = false;
    this.pending = Promise.resolve();
  }

  /** Ids of the ancestors shown (a live change naming one re-reads them). */
  /** @param {string} id */
  has(id) {
    return this.ancestors.some((ancestor) => ancestor.id === id);
  }

  /** Read the first page (the view's first load). */
  first() {
    return this.serial(async () => {
      const page = await this.page(LINEAGE_PAGE, "");
      this.ancestors = page.ancestors;
      this.token = page.next_page_token;
      this.read = true;
    });
  }

  /** Read the next page up the chain. */
  more() {
    return this.serial(async () => {
      if (!this.token) return;
      const page = await this.page(LINEAGE_PAGE, this.token);
      this.ancestors = this.ancestors.concat(page.ancestors);
      this.token = page.next_page_token;
    });
  }

  /** Re-read as many ancestors as are shown (labels, statuses, slots changed), in pages of
   * at most MAX_PAGE. */
  reload() {
    return this.serial(async () => {
      const want = Math.max(this.ancestors.length, LINEAGE_PAGE);
      /** @type {Ancestor[]} */
      let found = [];
      let token = "";
      do {
        const page = await this.page(Math.min(want - found.length, MAX_PAGE), token);
        found = found.concat(page.ancestors);
        token = page.next_page_token;
      } while (token && found.length < want);
      this.ancestors = found;
      this.token = token;
    });
  }

  /**
   * @param {number} size
   * @param {string} token
   * @returns {Promise<{ancestors: Ancestor[], next_page_token: string}>}
   */
  page(size, token) {
    const query = new URLSearchParams({ page_size: String(size) });
    if (token) query.set("page_token", token);
    return call("GET", `${this.path}?${query}`);
  }

  /** One change at a time, in the order asked (a failure does not block the next). */
  /** @param {() => Promise<void>} step */
  serial(step) {
    const run = this.pending.then(step, step);
    this.pending = run.catch(() => {});
    return run;
  }

  /**
   * The nav the view shows: `view` is the session's own view (its label and depth, which
   * says how many ancestors are not read yet); `onMore` reads the next page.
   * @param {{label: string, depth: number}} view
   * @param {() => void} onMore
   */
  node(view, onMore) {
    if (!this.read || (!this.ancestors.length && !this.token)) {
      return el("nav", { class: "lineage muted", id: "lineage-nav" }, "Root session");
    }
    const items = [];
    if (this.token) {
      const left = Math.max(view.depth - this.ancestors.length, 1);
      items.push(
        el(
          "li",
          { class: "lineage-more" },
          el("button", { type: "button", id: "lineage-more", onclick: onMore }, `${left} more ${left === 1 ? "ancestor" : "ancestors"}…`),
        ),
      );
    }
    for (const ancestor of [...this.ancestors].reverse()) items.push(this.ancestor(ancestor));
    items.push(el("li", { class: "lineage-self", "aria-current": "page" }, el("bdi", {}, view.label)));
    return el(
      "nav",
      { class: "lineage", id: "lineage-nav", "aria-label": "lineage" },
      el("ol", { id: "lineage" }, items),
    );
  }

  /** @param {Ancestor} ancestor */
  ancestor(ancestor) {
    const archived = ancestor.status === "archived";
    return el(
      "li",
      { class: `ancestor${archived ? " archived" : ""}`, dataset: { id: ancestor.id, status: ancestor.status } },
      el("a", { href: `#/session/${ancestor.id}`, title: ancestor.id, dir: "auto", class: "user-text" }, ancestor.label),
      archived ? el("span", { class: "badge" }, "archived") : null,
      el("span", { class: "turns muted" }, plural(ancestor.turn_count, "turn")),
      slot("memory", "Memory", ancestor.memory),
      slot("insight", "Insight", ancestor.insight),
    );
  }
}

/** An ancestor's memory or insight, collapsed, as text (absent: nothing). */
/**
 * @param {string} name
 * @param {string} title
 * @param {string | null | undefined} value
 */
function slot(name, title, value) {
  if (value === null || value === undefined) return null;
  return el(
    "details",
    { class: `lineage-slot lineage-${name}` },
    el("summary", {}, title),
    el("pre", { class: "text" }, value),
  );
}
