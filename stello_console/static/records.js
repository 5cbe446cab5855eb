// A session's records: the newest page first, older pages on request and newer records
// as they are appended, all by ListRecords' page tokens (a page is bounded in count and
// bytes); a record is shown once whatever order pages and live changes arrive in.

import { call } from "./api.js";
import { el, when } from "./dom.js";

const PAGE = 50;
const NEWER_PAGES = 4; // further behind than this, the list jumps to the newest page

export class RecordList {
  /**
   * `path` is the session's records endpoint; `view` (the SessionView) gives fork(seq)
   * for "Fork here", current() (still on screen), atNewest() and toNewest() (the list
   * follows new records while it is scrolled to its end) and app.reportError(error).
   */
  constructor(path, view) {
    this.path = path;
    this.view = view;
    this.newest = null; // the highest seq shown
    this.olderToken = "";
    this.newer = null; // the read of newer records in progress
    this.newerAgain = false;
    this.list = el("ol", { class: "records", id: "records" });
    this.older = el(
      "button",
      { type: "button", id: "older", hidden: true, onclick: () => this.loadOlder() },
      "Load older records",
    );
  }

  page(query) {
    return call("GET", `${this.path}?limit=${PAGE}${query}`);
  }

  /** Read the newest page. */
  first() {
    return this.page("");
  }

  /** The newest page: the list starts over with it; its token leads to older records. */
  takeNewest(page) {
    this.list.replaceChildren();
    this.newest = null;
    this.addNewer(page.records);
    this.olderToken = page.next_page_token;
    this.older.hidden = !this.olderToken;
    this.markEmpty();
  }

  /** Records after the newest shown go at the bottom (above a reply still streaming). */
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

  /** Whether records up to `seq` are newer than any shown. */
  lacks(seq) {
    return this.newest === null || seq > this.newest;
  }

  markEmpty() {
    if (!this.list.children.length) this.list.append(el("li", { class: "empty muted" }, "No records yet."));
  }

  /** Show a reply being streamed (removed once the turn is stored, or marked failed). */
  addPending(...items) {
    this.list.querySelector(".empty")?.remove();
    this.list.append(...items);
  }

  async loadOlder() {
    this.older.disabled = true;
    try {
      const page = await this.page(`&page_token=${encodeURIComponent(this.olderToken)}`);
      const first = this.list.querySelector("li[data-seq]");
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

  /** Load older pages until record `seq` is shown (as far as pages go), then scroll it
   * into view and mark it: where a search hit opens its session. */
  async reveal(seq) {
    const shown = () => this.list.querySelector(`li[data-seq="${seq}"]`);
    while (!shown() && this.olderToken && this.view.current()) await this.loadOlder();
    const item = shown();
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
  drop(first, last) {
    for (const item of [...this.list.querySelectorAll("li[data-seq]")]) {
      const seq = Number(item.dataset.seq);
      if (seq >= first && seq <= last) item.remove();
    }
    this.markEmpty();
  }

  item(record) {
    const head = el(
      "div",
      { class: "record-head" },
      el("span", { class: "seq" }, `#${record.seq}`),
      el("span", { class: "role" }, record.role),
      record.inherited ? el("span", { class: "badge inherited", title: "read from the source session" }, "inherited") : null,
      record.tool_call_id ? el("span", { class: "muted" }, `answers ${record.tool_call_id}`) : null,
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
    return el(
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
  }
}
