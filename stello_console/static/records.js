// A session's records: the newest page first, older pages on request and newer records
// as they are appended, all by ListRecords' page tokens (a page is bounded in count and
// bytes); a record is shown once whatever order pages and live changes arrive in. A record
// to open (a search hit) comes with a window around it, two reads whatever its distance from
// the newest: the page up to it (older pages on request) and the page after it (newer pages
// on request until the window meets the newest record, from when it follows new ones).

import { call } from "./api.js";
import { el, userText, when } from "./dom.js";

const PAGE = 50;
const WINDOW = 25; // records on each side of a record opened by its seq
const NEWER_PAGES = 4; // further behind than this, the list jumps to the newest page

/**
 * A record as /api/sessions/ID/records gives it (ListRecords').
 * @typedef {object} Record_
 * @property {number} seq
 * @property {string} role
 * @property {string} content
 * @property {boolean} inherited
 * @property {string} tool_call_id
 * @property {{id: string, name: string, arguments_json: string}[]} tool_calls
 * @property {string} created_at
 */
/** @typedef {{records: Record_[], next_page_token: string}} Page */

export class RecordList {
  /**
   * `path` is the session's records endpoint; `view` (the SessionView) gives fork(seq)
   * for "Fork here", current() (still on screen), atNewest() and toNewest() (the list
   * follows new records while it is scrolled to its end) and app.reportError(error).
   * @param {string} path
   * @param {import("./session.js").SessionView} view
   */
  constructor(path, view) {
    this.path = path;
    this.view = view;
    /** @type {number | null} */
    this.newest = null; // the highest seq shown
    this.olderToken = "";
    this.olderQuery = ""; // the walk the older token continues ("" = from the newest record)
    this.walkLimit = PAGE; // a token continues its walk with the page size it began with
    this.newerToken = ""; // set while a window does not reach the newest record
    this.newerQuery = "";
    /** @type {Promise<void> | null} */
    this.newer = null; // the read of newer records in progress
    this.newerAgain = false;
    this.list = el("ol", { class: "records", id: "records" });
    this.older = el(
      "button",
      { type: "button", id: "older", hidden: true, onclick: () => this.loadOlder() },
      "Load older records",
    );
    this.newerButton = el(
      "button",
      { type: "button", id: "newer", hidden: true, onclick: () => this.loadNewerPage() },
      "Load newer records",
    );
    this.notice = el("p", { class: "error-text", id: "records-notice", role: "status", hidden: true });
    /** @type {WeakMap<Element, Record_>} each item's record */
    this.shown = new WeakMap();
  }

  /**
   * The assistant record whose tool calls are still open at record `seq` (not all answered
   * by then), as the records shown tell, else null: a fork cut at `seq` leaves that group out
   * (storage's _closed_cut). `answered`: the seq by which they are all answered, if shown.
   * @param {number} seq
   * @returns {{caller: number, answered: number | null} | null}
   */
  openCall(seq) {
    const records = [...this.list.querySelectorAll("li[data-seq]")].flatMap((item) => this.shown.get(item) ?? []);
    let start = records.findIndex((record) => record.seq === seq);
    if (start < 0 || (records[start].role !== "tool" && !records[start].tool_calls.length)) return null;
    while (start >= 0 && records[start].role === "tool") start -= 1;
    const caller = records[start];
    if (!caller?.tool_calls.length) return null; // answers of no call shown: kept as they are
    const left = new Set(caller.tool_calls.map((made) => made.id));
    for (const record of records.slice(start + 1)) {
      if (record.role !== "tool") break;
      left.delete(record.tool_call_id);
      if (!left.size) return record.seq <= seq ? null : { caller: caller.seq, answered: record.seq };
    }
    return { caller: caller.seq, answered: null };
  }

  /**
   * @param {string} query
   * @param {number} limit
   * @returns {Promise<Page>}
   */
  page(query, limit = PAGE) {
    return call("GET", `${this.path}?limit=${limit}${query}`);
  }

  /** Read the window around record `seq`: the records up to it and those after it. */
  /** @param {number} seq */
  async around(seq) {
    const [upTo, after] = await Promise.all([this.page(`&before=${seq + 1}`, WINDOW), this.page(`&after=${seq}`, WINDOW)]);
    return { seq, upTo, after };
  }

  /** The window around a record: the list starts over with it; older and newer pages on
   * request from its ends. */
  /** @param {{seq: number, upTo: Page, after: Page}} window */
  takeWindow({ seq, upTo, after }) {
    this.list.replaceChildren();
    this.newest = null;
    const records = [...upTo.records, ...after.records];
    for (const record of records) this.list.append(this.item(record));
    if (records.length) this.newest = records[records.length - 1].seq;
    this.walkLimit = WINDOW;
    this.olderQuery = `&before=${seq + 1}`;
    this.olderToken = upTo.next_page_token;
    this.older.hidden = !this.olderToken;
    this.newerQuery = `&after=${seq}`;
    this.newerToken = after.next_page_token;
    this.newerButton.hidden = !this.newerToken;
    this.markEmpty();
  }

  /** Say something about the records shown (a record asked for that is not there). */
  /** @param {string} text */
  say(text) {
    this.notice.textContent = text;
    this.notice.hidden = !text;
  }

  /** The next page after a window's end; once none is left the list follows new records. */
  async loadNewerPage() {
    this.newerButton.disabled = true;
    try {
      const page = await this.page(`${this.newerQuery}&page_token=${encodeURIComponent(this.newerToken)}`, this.walkLimit);
      if (!this.view.current()) return;
      this.view.app.clearError();
      const fresh = page.records.filter((record) => this.newest === null || record.seq > this.newest);
      this.list.querySelector(".empty")?.remove();
      const pending = this.list.querySelector(".pending");
      for (const record of fresh) this.list.insertBefore(this.item(record), pending);
      if (fresh.length) this.newest = fresh[fresh.length - 1].seq;
      this.newerToken = page.next_page_token;
      this.newerButton.hidden = !this.newerToken;
    } catch (error) {
      this.view.app.reportError(error);
    } finally {
      this.newerButton.disabled = false;
    }
  }

  /** Read the newest page. */
  first() {
    return this.page("");
  }

  /** The newest page: the list starts over with it; its token leads to older records. */
  /** @param {Page} page */
  takeNewest(page) {
    this.list.replaceChildren();
    this.newest = null;
    this.newerToken = "";
    this.newerButton.hidden = true;
    this.addNewer(page.records);
    this.olderQuery = "";
    this.walkLimit = PAGE;
    this.olderToken = page.next_page_token;
    this.older.hidden = !this.olderToken;
    this.markEmpty();
  }

  /** Records after the newest shown go at the bottom (above a reply still streaming). */
  /** @param {Record_[]} records */
  addNewer(records) {
    const fresh = records.filter((record) => this.lacks(record.seq));
    if (!fresh.length) return;
    const following = this.view.atNewest();
    this.list.querySelector(".empty")?.remove();
    const pending = this.list.querySelector(".pending");
    for (const record of fresh) this.list.insertBefore(this.item(record), pending);
    this.newest = fresh[fresh.length - 1].seq;
    if (following) this.view.toNewest();
  }

  /** Whether records up to `seq` are newer than any shown (while a window does not reach
   * the newest record, its "Load newer records" reads them: none is lacking). */
  /** @param {number} seq */
  lacks(seq) {
    if (this.newerToken) return false;
    return this.newest === null || seq > this.newest;
  }

  /** Whether a record of `role` with exactly `content` is shown after seq `after` (null:
   * any). */
  /**
   * @param {string} role
   * @param {string} content
   * @param {number | null} after
   */
  holds(role, content, after) {
    for (const item of /** @type {NodeListOf<HTMLElement>} */ (this.list.querySelectorAll(`li.role-${role}[data-seq]`))) {
      if (Number(item.dataset.seq) > (after ?? 0) && item.querySelector(".content")?.textContent === content) return true;
    }
    return false;
  }

  markEmpty() {
    if (!this.list.children.length) this.list.append(el("li", { class: "empty muted" }, "No records yet."));
  }

  /** Show a reply being streamed (removed once the turn is stored, or marked failed). */
  /** @param {Node[]} items */
  addPending(...items) {
    this.list.querySelector(".empty")?.remove();
    this.list.append(...items);
  }

  async loadOlder() {
    this.older.disabled = true;
    try {
      const page = await this.page(`${this.olderQuery}&page_token=${encodeURIComponent(this.olderToken)}`, this.walkLimit);
      this.view.app.clearError();
      const first = /** @type {HTMLElement | null} */ (this.list.querySelector("li[data-seq]"));
      const oldest = first ? Number(first.dataset.seq) : Infinity;
      this.list.prepend(...page.records.filter((r) => r.seq < oldest).map((r) => this.item(r)));
      this.olderToken = page.next_page_token;
      this.older.hidden = !this.olderToken;
    } catch (error) {
      this.view.app.reportError(error);
    } finally {
      this.older.disabled = false;
    }
  }

  /** Scroll record `seq` (in the window read around it) into view and mark it: where a
   * search hit opens its session; false when it is not there. */
  /** @param {number} seq */
  reveal(seq) {
    const item = this.list.querySelector(`li[data-seq="${seq}"]`);
    if (!item) return false;
    item.classList.add("found");
    item.scrollIntoView({ block: "center" });
    return true;
  }

  /** Read the records after the newest shown, page by page (one read at a time). */
  loadNewer() {
    if (this.newer) {
      this.newerAgain = true;
      return this.newer;
    }
    this.newer = (async () => {
      do {
        this.newerAgain = false;
        await this.readNewer();
      } while (this.newerAgain && this.view.current());
    })().finally(() => (this.newer = null));
    return this.newer;
  }

  async readNewer() {
    const after = `&after=${this.newest ?? 0}`;
    let token = "";
    for (let pages = 0; pages < NEWER_PAGES; pages += 1) {
      const page = await this.page(`${after}&page_token=${encodeURIComponent(token)}`);
      if (!this.view.current()) return;
      this.addNewer(page.records);
      token = page.next_page_token;
      if (!token) return;
    }
    this.takeNewest(await this.first());
  }

  /** Records trimmed away (seqs `first` to `last`) leave the list. */
  /**
   * @param {number} first
   * @param {number} last
   */
  drop(first, last) {
    for (const item of [.../** @type {NodeListOf<HTMLElement>} */ (this.list.querySelectorAll("li[data-seq]"))]) {
      const seq = Number(item.dataset.seq);
      if (seq >= first && seq <= last) item.remove();
    }
    this.markEmpty();
  }

  /** @param {Record_} record */
  item(record) {
    const head = el(
      "div",
      { class: "record-head" },
      el("span", { class: "seq" }, `#${record.seq}`),
      el("span", { class: "role" }, record.role),
      record.inherited ? el("span", { class: "badge inherited", title: "read from the source session" }, "inherited") : null,
      record.tool_call_id ? el("span", { class: "muted" }, "answers ", userText(record.tool_call_id)) : null,
      el("span", { class: "grow" }),
      el("span", { class: "muted when" }, when(record.created_at)),
      el(
        "button",
        {
          type: "button",
          class: "fork-here",
          title: "fork with the records up to this one",
          "aria-label": `Fork here, at record ${record.seq}`,
          onclick: () => this.view.fork(record.seq),
        },
        "Fork here",
      ),
    );
    const item = el(
      "li",
      { class: `record role-${record.role}${record.inherited ? " inherited" : ""}`, dataset: { seq: String(record.seq) } },
      head,
      el("div", { class: "content" }, record.content),
      record.tool_calls.length
        ? el(
            "ul",
            { class: "tool-calls" },
            record.tool_calls.map((c) => el("li", {}, `→ ${c.name}(${c.arguments_json})`, el("span", { class: "muted" }, `  ${c.id}`))),
          )
        : null,
    );
    this.shown.set(item, record);
    return item;
  }
}
