// One session: its lineage (GetLineage, page by page), meta, system prompt, config,
// insight and memory, its records page by page (the newest first, older ones on request,
// by ListRecords' page tokens), and the actions on it. Laid out as a chat: the lineage,
// title and actions stay at the top, the conversation scrolls between them and the
// composer, and opens at its newest record (it follows new ones while it is there). Live changes that name it update it
// in place: new records are read after the last one shown, trimmed ones leave, and the
// header and slots are re-read (an edit in progress is kept); changes that name one of its
// ancestors re-read the lineage.

import { ApiError, call, requestId, stream } from "./api.js";
import { dialog, el, isolated, plural, replace, setTitle, userText, when } from "./dom.js";
import { LABEL_MAX, checkLabel } from "./labels.js";
import { Lineage } from "./lineage.js";
import { RecordList } from "./records.js";
import { SlotEditor } from "./slots.js";

// Events that change what the header, meta or slots show: the view is re-read.
const VIEW_KINDS = new Set([
  "session_updated",
  "session_archived",
  "session_unarchived",
  "turn_committed",
  "system_prompt_put",
  "insight_put",
  "insight_cleared",
  "memory_put",
  "config_put",
  "metadata_changed",
]);
// The reason of a NOT_FOUND for a session that is gone (deleted, by another client too).
const SESSION_NOT_FOUND = "SESSION_NOT_FOUND";
// What takes the focus in a part of the view (swap() keeps it on the same one).
const CONTROLS = "a[href], button, input, select, textarea, summary";
// Events that change what the lineage shows of an ancestor: the lineage is re-read.
const ANCESTOR_KINDS = new Set([
  "session_updated",
  "session_archived",
  "session_unarchived",
  "turn_committed",
  "insight_put",
  "insight_cleared",
  "memory_put",
]);

/**
 * A message sent and its reply while it streams (pendingTurn()).
 * @typedef {ReturnType<SessionView["pendingTurn"]>} Turn
 */

/** The view of one session, drawn into `container`. */
export class SessionView {
  /**
   * `app` gives forest(), reportError(error), refreshNodes(ids), open(id) for navigation
   * after a fork or delete, and `view` (the view it shows now).
   * @param {HTMLElement} container
   * @param {any} app
   * @param {string} id
   * @param {string | null} focus
   */
  constructor(container, app, id, focus = null) {
    this.container = container;
    this.app = app;
    this.id = id;
    this.focus = focus; // the address's record to open (#/session/ID/at/SEQ's SEQ), else null
    /** @type {any} the session as /api/sessions/ID answered (null until loaded) */
    this.view = null;
    /** @type {Promise<void> | null} */
    this.shown = null;
    this.gone = false;
    /** aborted when the session is gone: its dialogs close */
    this.dialogs = new AbortController();
    this.editors = /** @type {{insight: SlotEditor, memory: SlotEditor}} */ ({}); // slots() makes them
    // The composer, made by draw() (sendBox()), and the reply streaming, if any.
    /** @type {HTMLTextAreaElement} */ this.message;
    /** @type {HTMLButtonElement} */ this.sendButton;
    /** @type {HTMLButtonElement} */ this.stopButton;
    /** @type {HTMLFormElement} */ this.sendForm;
    this.sendable = false;
    this.sending = false;
    /** @type {AbortController | null} */
    this.streaming = null;
    /** @type {HTMLElement | null} */
    this.conversation = null;
    /** @type {any} a turn stopped before its commit, looked for in the records read next */
    this.unstored = null;
    this.records = new RecordList(`/api/sessions/${id}/records`, this);
    this.ancestry = new Lineage(id);
  }

  show() {
    this.shown = this.load();
    return this.shown;
  }

  /** The view, its lineage and records: the newest, or a window around the record the
   * address names (a seq that is no whole number is said, and the newest shown). */
  async load() {
    const at = this.focus;
    const seq = at !== null && /^\d{1,15}$/.test(at) ? Number(at) : null;
    const [view, page] = await Promise.all([
      call("GET", `/api/sessions/${this.id}`),
      seq === null ? this.records.first() : this.records.around(seq),
      this.ancestry.first(),
    ]);
    if (!this.current()) return;
    this.view = view;
    this.draw();
    if (seq === null) {
      this.records.takeNewest(/** @type {import("./records.js").Page} */ (page));
      if (at !== null) this.records.say(`There is no record “${at}” to open: a record is named by its seq, a whole number. The newest records are shown.`);
      this.toNewest();
      return;
    }
    const around = /** @type {{seq: number, upTo: import("./records.js").Page, after: import("./records.js").Page}} */ (page);
    this.records.takeWindow(around);
    if (this.records.reveal(seq)) return;
    const last = around.after.records.length ? null : around.upTo.records.at(-1)?.seq;
    const where = last === undefined ? "it has no records" : last === null ? "it may have been trimmed" : `its last record is #${last}`;
    this.records.say(`Record #${seq} is not in this session (${where}). The records nearest to it are shown.`);
    if (last !== null) this.toNewest();
  }

  /** Whether the conversation is scrolled to its end (new records then stay in view). */
  atNewest() {
    const box = this.conversation;
    return !box || box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  }

  /** Scroll the conversation to its newest record. */
  toNewest() {
    if (this.conversation) this.conversation.scrollTop = this.conversation.scrollHeight;
  }

  current() {
    return this.app.view === this && !this.gone;
  }

  draw() {
    const view = this.view;
    const archived = view.status === "archived";
    this.sendForm = this.sendBox(archived);
    this.conversation = el(
      "section",
      { class: "conversation", id: "conversation", "aria-label": "Conversation" },
      this.slots(archived),
      el("h3", {}, "Records"),
      this.records.notice,
      this.records.older,
      this.records.list,
      this.records.newerButton,
    );
    replace(
      this.container,
      el(
        "article",
        { class: `session${archived ? " is-archived" : ""}`, dataset: { id: view.id } },
        el(
          "header",
          { class: "session-top" },
          this.lineage(),
          this.head(),
          this.meta(),
          this.metadata(),
          view.source_session_id ? this.source(view.source_session_id) : null,
          this.actions(archived),
        ),
        this.conversation,
        this.sendForm,
      ),
    );
  }

  /** The title: the label, also in the browser tab's title. */
  head() {
    const view = this.view;
    setTitle(view.label);
    return el(
      "h2",
      { id: "session-head" },
      el("bdi", { id: "session-label" }, view.label),
      " ",
      el("span", { class: `status status-${view.status}`, id: "session-status" }, view.status),
    );
  }

  meta() {
    const view = this.view;
    return el(
      "p",
      { class: "meta muted", id: "session-meta" },
      `${plural(view.turn_count, "turn")} · created ${when(view.created_at)}`,
      view.last_active_at ? ` · last active ${when(view.last_active_at)}` : "",
      " · ",
      el("code", { class: "session-id" }, view.id),
    );
  }

  /** The session's metadata as `key=value` chips, as text (none: an empty line). */
  metadata() {
    const pairs = Object.entries(this.view.metadata ?? {});
    return el(
      "p",
      { class: "meta muted", id: "session-metadata", hidden: pairs.length === 0 },
      pairs.map(([key, value], index) => [
        index ? " " : null,
        el("code", { class: "metadata-pair" }, userText(quoted(key)), "=", userText(quoted(value))),
      ]),
    );
  }

  /** Re-read the view and update the header, meta, actions and slots in place. */
  async refreshView() {
    const view = await call("GET", `/api/sessions/${this.id}`);
    if (!this.current()) return;
    this.view = view;
    const archived = view.status === "archived";
    this.container.querySelector("article.session")?.classList.toggle("is-archived", archived);
    this.swap("#session-head", this.head());
    this.swap("#session-meta", this.meta());
    this.swap("#session-metadata", this.metadata());
    this.swap("#session-actions", this.actions(archived));
    this.swap("#lineage-nav", this.lineage());
    /** @type {Element} */ (this.container.querySelector("#system-prompt")).textContent = view.system_prompt ?? "(none)";
    this.swap("#config", this.config());
    this.editors.insight.take(view.insight, archived);
    this.editors.memory.take(view.memory, false);
    this.setSendable(!archived);
  }

  /**
   * Replace the part `selector` names with `node`; the focus, when it was in that part,
   * moves to the same control in the new one (by id, else by place: Archive's Unarchive),
   * rather than to the page's start.
   * @param {string} selector
   * @param {Element} node
   */
  swap(selector, node) {
    const old = this.container.querySelector(selector);
    if (!old) return;
    const focused = document.activeElement;
    const inside = focused instanceof HTMLElement && old.contains(focused) ? focused : null;
    const place = inside ? [...old.querySelectorAll(CONTROLS)].indexOf(inside) : -1;
    old.replaceWith(node);
    if (!inside) return;
    const same = (inside.id && node.querySelector(`#${CSS.escape(inside.id)}`)) || node.querySelectorAll(CONTROLS)[place];
    if (same instanceof HTMLElement) same.focus();
  }

  lineage() {
    return this.ancestry.node(this.view, () => this.moreLineage());
  }

  /** The next page of ancestors, up the chain. */
  async moreLineage() {
    try {
      await this.ancestry.more();
      this.app.clearError();
      if (this.current()) this.swap("#lineage-nav", this.lineage());
    } catch (error) {
      this.app.reportError(error);
    }
  }

  /** Re-read the ancestors shown (one of them changed) and redraw them. */
  async refreshLineage() {
    await this.ancestry.reload();
    if (this.current()) this.swap("#lineage-nav", this.lineage());
  }

  /** "Forked from" the source, by its label in the forest (its id when the forest lacks it). */
  /** @param {string} sourceId */
  source(sourceId) {
    const node = this.app.forest().get(sourceId);
    return el(
      "p",
      { class: "muted", id: "session-source" },
      "Forked from ",
      el("a", { href: `#/session/${sourceId}`, dir: "auto", class: "user-text" }, node ? node.label : sourceId),
    );
  }

  /** @param {boolean} archived */
  actions(archived) {
    return el(
      "div",
      { class: "actions", id: "session-actions" },
      el("button", { type: "button", id: "fork", onclick: () => this.fork(null) }, "Fork…"),
      el(
        "button",
        { type: "button", id: "rename", disabled: archived, title: archived ? "Archived: unarchive it to rename it" : null, onclick: () => this.rename() },
        "Rename…",
      ),
      archived
        ? el("button", { type: "button", id: "unarchive", onclick: () => this.setArchived(false) }, "Unarchive")
        : el("button", { type: "button", id: "archive", onclick: () => this.setArchived(true) }, "Archive"),
      el("button", { type: "button", id: "delete", class: "danger", onclick: () => this.remove() }, "Delete…"),
    );
  }

  /** The frozen config; its system prompt only when it differs from the one shown above
   * (a compress fork's summary is both: it is shown once). */
  config() {
    const config = this.view.config;
    const skills = !config || config.skills === null ? "inherited (all)" : config.skills.join(", ") || "none";
    const prompt = config?.system_prompt ?? null;
    const same = prompt !== null && prompt === this.view.system_prompt;
    return el(
      "dl",
      { id: "config" },
      el("dt", {}, "system prompt"),
      el("dd", {}, same ? el("span", { class: "muted" }, "the system prompt above") : el("pre", { class: "text" }, prompt ?? "(not set)")),
      el("dt", {}, "skills"),
      el("dd", {}, skills),
    );
  }

  /** @param {boolean} archived */
  slots(archived) {
    const view = this.view;
    this.editors.insight = new SlotEditor(this, "insight", "Insight (one-shot note for the next turn)", view.insight, archived);
    this.editors.memory = new SlotEditor(this, "memory", "Memory", view.memory, false);
    return el(
      "div",
      { class: "slots" },
      el(
        "details",
        { open: true },
        el("summary", {}, "System prompt"),
        el("pre", { class: "text", id: "system-prompt" }, view.system_prompt ?? "(none)"),
      ),
      el("details", {}, el("summary", {}, "Config"), this.config()),
      this.editors.insight.node,
      this.editors.memory.node,
    );
  }

  /** The forest changed (a live change, a refetch): the source's label may be a new one. */
  forestChanged() {
    const sourceId = this.view?.source_session_id;
    if (sourceId && this.current()) this.swap("#session-source", this.source(sourceId));
  }

  /** Live changes: those naming this session update it; its deletion says so. */
  /** @param {any[]} events */
  async onEvents(events) {
    await this.shown?.catch(() => {});
    if (!this.view || !this.current()) return;
    let newer = false;
    let reread = false;
    let ancestors = false;
    for (const event of events) {
      if (event.kind === "subtree_deleted" && event.session_ids.includes(this.id)) {
        this.markGone();
        return;
      }
      if (ANCESTOR_KINDS.has(event.kind) && this.ancestry.has(event.session_id)) ancestors = true;
      if (event.session_id !== this.id) continue;
      if (event.kind === "records_appended") newer = newer || this.records.lacks(event.last_seq);
      else if (event.kind === "records_trimmed") this.records.drop(event.first_seq, event.last_seq);
      else if (VIEW_KINDS.has(event.kind)) reread = true;
    }
    await Promise.all([
      newer ? this.records.loadNewer().then(() => this.unstored && this.keptAfterAll(this.unstored)) : null,
      reread ? this.refreshView() : null,
      ancestors ? this.refreshLineage() : null,
    ]);
  }

  /** The session is gone: the view says so, keeping what the user typed and had not sent
   * or saved (the message box, an edited insight or memory) to copy. */
  markGone(why = "This session was deleted. ") {
    const unsent = this.unsent();
    this.gone = true;
    this.dialogs.abort(); // a dialog about a session that is gone: the view says so once
    setTitle();
    replace(
      this.container,
      el("p", { class: "muted", id: "view-gone" }, why, el("a", { href: "#/" }, "Back to the forest")),
      unsent.map(([name, words, text]) => keptText(name, words, text)),
    );
  }

  /** What the user typed here and the session has not taken: [name, words, text] each. */
  unsent() {
    /** @type {[string, string, string][]} */
    const kept = [];
    if (!this.message) return kept;
    if (this.message.value.trim()) kept.push(["message", "Your message was not sent.", this.message.value]);
    for (const [name, editor] of Object.entries(this.editors)) {
      if (editor.text.value !== editor.saved) kept.push([name, `Your ${name} was not saved.`, editor.text.value]);
    }
    return kept;
  }

  /**
   * `pending`, an action's call on this session; null when the session turns out deleted
   * elsewhere, its deletion event not here yet: the page then shows it as that event will
   * (gone from the forest with its subtree, this view saying so, its dialogs closed).
   * @param {Promise<any>} pending
   * @param {string} action what the user pressed, as the view names it
   */
  async acted(pending, action) {
    try {
      return await pending;
    } catch (error) {
      if (!(error instanceof ApiError && error.reason === SESSION_NOT_FOUND)) throw error;
      await this.deletedElsewhere(action);
      return null;
    }
  }

  /** The session was deleted elsewhere before `action` reached it, its deletion event not
   * here yet: shown as that event will show it. */
  /** @param {string} action */
  async deletedElsewhere(action) {
    this.markGone(`This session was deleted elsewhere before your ${action} reached it. `);
    await this.app.apply([{ kind: "subtree_deleted", session_ids: [this.id] }]);
  }

  /** @param {boolean} archived */
  sendBox(archived) {
    this.message = el("textarea", { id: "message", rows: 2, "aria-label": "Message" });
    this.sendButton = el("button", { type: "submit", id: "send", class: "primary" }, "Send");
    this.stopButton = el(
      "button",
      { type: "button", id: "stop", class: "danger", hidden: true, title: "Stop the reply (Escape in the message box)", onclick: () => this.stop() },
      "Stop",
    );
    const form = el("form", { class: "send", onsubmit: (/** @type {SubmitEvent} */ event) => this.send(event) }, this.message, this.sendButton, this.stopButton);
    this.message.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
      else if (event.key === "Escape" && this.sending) {
        event.preventDefault();
        this.stop();
      }
    });
    this.setSendable(!archived);
    return form;
  }

  /** @param {boolean} sendable */
  setSendable(sendable) {
    this.sendable = sendable;
    this.message.disabled = !sendable;
    this.message.placeholder = sendable ? "Message (Ctrl+Enter sends)" : "Archived: unarchive it to send";
    this.sendButton.disabled = !sendable || this.sending;
  }

  /** While a reply streams, Stop stands in for Send (the focus moves with it). */
  /** @param {boolean} sending */
  setSending(sending) {
    const focused = document.activeElement;
    this.sending = sending;
    this.sendButton.hidden = sending;
    this.stopButton.hidden = !sending;
    this.setSendable(this.sendable);
    if (sending && focused === this.sendButton) this.stopButton.focus();
    if (!sending && focused === this.stopButton) this.message.focus();
  }

  /** Stop the reply streaming: the request is aborted, so the console cancels the turn. */
  stop() {
    this.streaming?.abort();
  }

  /** The view goes (signed out): a reply still streaming is stopped. */
  leave() {
    this.stop();
  }

  /** @param {Event} event */
  async send(event) {
    event.preventDefault();
    const content = this.message.value;
    if (this.sending || !content.trim()) return;
    const turn = this.pendingTurn(content);
    const controller = (this.streaming = new AbortController());
    this.setSending(true);
    let done = null;
    /** @type {{code: string, message: string, reason?: string | null} | null} */
    let failure = null;
    try {
      await stream(`/api/sessions/${this.id}/send`, { content, request_id: requestId() }, (name, data) => {
        if (name === "delta") turn.reply.append(data.text);
        else if (name === "tool_call") turn.calls.append(el("li", {}, `→ ${data.name}(${data.arguments_json})`));
        else if (name === "done") done = data;
        else if (name === "error") failure = data;
      }, { signal: controller.signal });
    } catch (error) {
      // An ApiError (the console refused or is gone), or the browser's TypeError when the
      // connection broke mid-reply ("network error"): that one has no code of its own.
      if (!controller.signal.aborted) {
        failure = error instanceof ApiError ? { code: error.code, message: error.message, reason: error.reason } : { code: "UNAVAILABLE", message: `the reply's stream broke (${error})` };
      }
    }
    this.streaming = null;
    this.setSending(false);
    if (failure?.reason === SESSION_NOT_FOUND) await this.deletedElsewhere("Send"); // the message is kept
    else if (done) await this.stored(done, turn);
    else if (failure || !controller.signal.aborted) this.failed(turn, failure);
    else await this.stopped(turn);
  }

  /** The message and the reply to come, shown below the records until the turn ends. */
  /** @param {string} content */
  pendingTurn(content) {
    this.unstored = null; // a turn stopped earlier is no longer looked for
    const reply = el("div", { class: "content", id: "streaming" });
    const calls = el("ul", { class: "tool-calls" });
    const state = el("span", { class: "muted" }, "streaming…");
    const user = el("li", { class: "record role-user pending" }, el("div", { class: "record-head" }, el("span", { class: "role" }, "user")), el("div", { class: "content" }, content));
    const assistant = el("li", { class: "record role-assistant pending" }, el("div", { class: "record-head" }, el("span", { class: "role" }, "assistant"), state), reply, calls);
    this.records.addPending(user, assistant);
    this.toNewest();
    return { content, since: this.records.newest, user, assistant, reply, calls, state };
  }

  /** The turn is stored: its records replace the pending ones. */
  /**
   * @param {any} done
   * @param {Turn} turn
   */
  async stored(done, turn) {
    turn.user.remove();
    turn.assistant.remove();
    // A window short of the newest record jumps to the newest page, with the reply.
    if (this.records.newerToken) this.records.takeNewest(await this.records.first());
    else this.records.addNewer(done.records);
    this.message.value = "";
    this.app.clearError();
    const report = (/** @type {unknown} */ error) => this.app.reportError(error);
    await Promise.all([this.app.refreshNodes([this.id]).catch(report), this.refreshView().catch(report)]);
  }

  /** The turn failed: the gateway stored nothing of it; the message stays in the box. */
  /**
   * @param {Turn} turn
   * @param {{code: string, message: string, reason?: string | null} | null} failure
   */
  failed(turn, failure) {
    const message = failure ? `${failure.code}: ${failure.message}` : "the stream ended without a reply";
    turn.assistant.classList.remove("pending");
    turn.user.classList.remove("pending");
    turn.assistant.replaceChildren(el("div", { class: "record-head" }, el("span", { class: "role" }, "not stored")), el("div", { class: "content error-text" }, message));
    turn.user.classList.add("failed");
    this.app.reportError({ toString: () => message });
  }

  /**
   * Stopped: the gateway stores nothing of a turn cancelled before its commit and gives its
   * lease back at once; one whose commit was already sent is stored whole. The records after
   * those shown say which: a stored turn shows as records, else the partial reply stays,
   * marked as not stored, and the message stays in the box.
   */
  /** @param {Turn} turn */
  async stopped(turn) {
    turn.reply.removeAttribute("id");
    turn.state.textContent = "stopping…";
    await this.records.loadNewer().catch(() => {});
    if (this.keptAfterAll(turn)) return;
    turn.user.classList.replace("pending", "failed");
    turn.assistant.classList.replace("pending", "stopped");
    turn.state.textContent = "stopped · not stored";
    turn.assistant.append(el("p", { class: "muted", id: "send-note", role: "status" }, "Stopped — nothing was stored. The session takes a new message now; yours is still in the box."));
    this.unstored = turn;
  }

  /** Whether a stopped turn was stored all the same (its commit was under way): its
   * records then show and its pending items go. */
  /** @param {Turn} turn */
  keptAfterAll(turn) {
    if (!this.records.holds("user", turn.content, turn.since)) return false;
    turn.user.remove();
    turn.assistant.remove();
    this.unstored = null;
    this.message.value = "";
    this.records.say("Stopped too late: the turn was already being stored, so it is kept (below).");
    const report = (/** @type {unknown} */ error) => this.app.reportError(error);
    this.app.refreshNodes([this.id]).catch(report);
    return true;
  }

  /** @param {number | null} seq */
  async fork(seq) {
    const profiles = await this.profiles();
    const open = seq === null ? null : this.records.openCall(seq);
    const until = open ? open.caller - 1 : seq; // where the gateway cuts a fork at `seq`
    const context = el(
      "select",
      { name: "context", id: "fork-context" },
      el("option", { value: "inherit" }, until === null ? "inherit all records" : `inherit records up to #${until}`),
      el("option", { value: "none" }, "none (start empty)"),
      el("option", { value: "compress" }, "compress (summary in the system prompt)"),
    );
    const upTo = el("input", { name: "inherit_until_seq", id: "fork-up-to", type: "number", min: "0", value: until === null ? "" : String(until), placeholder: "all" });
    context.addEventListener("change", () => {
      upTo.disabled = context.value !== "inherit";
    });
    const profile = el("select", { name: "profile", id: "fork-profile" }, el("option", { value: "" }, "(no profile)"), profiles.map((/** @type {{name: string}} */ p) => el("option", { value: p.name }, p.name)));
    const child = await dialog(
      ["Fork “", userText(this.view.label), seq === null ? "”" : `” at #${seq}`],
      el(
        "div",
        { class: "fields" },
        el("label", {}, "Label", el("input", { name: "label", id: "fork-label", required: true, value: forkLabel(this.view.label) })),
        el("label", {}, "Context", context),
        el("label", {}, "Up to seq", upTo),
        open ? cutNote(/** @type {number} */ (seq), open) : null,
        el("label", {}, "Profile", profile),
        el("label", {}, "Variables (name=value, one a line)", el("textarea", { name: "profile_vars", id: "fork-vars", rows: 2 })),
        el("label", {}, "System prompt", el("textarea", { name: "system_prompt", id: "fork-system-prompt", rows: 2 })),
        el("label", {}, "Opening message", el("input", { name: "prompt", id: "fork-prompt" })),
      ),
      "Fork",
      {
        signal: this.dialogs.signal,
        act: (form) => {
          checkLabel(form.get("label"));
          return this.acted(call("POST", `/api/sessions/${this.id}/fork`, forkBody(form)), "Fork");
        },
      },
    );
    if (!child) return;
    this.app.clearError();
    await this.app.refreshNodes([child.id]);
    this.app.open(child.id);
  }

  /** A new label: the dialog holds the label; a refused one keeps it open, saying why. */
  async rename() {
    const renamed = await dialog(
      ["Rename “", userText(this.view.label), "”"],
      el("div", { class: "fields" }, el("label", {}, "Label", el("input", { name: "label", id: "rename-label", required: true, dir: "auto", value: this.view.label }))),
      "Rename",
      {
        signal: this.dialogs.signal,
        act: (form) => {
          const label = form.get("label");
          checkLabel(label);
          return this.acted(call("PUT", `/api/sessions/${this.id}/label`, { label }), "Rename");
        },
      },
    );
    if (!renamed) return;
    this.app.clearError();
    const report = (/** @type {unknown} */ error) => this.app.reportError(error);
    await Promise.all([this.app.refreshNodes([this.id]).catch(report), this.current() ? this.refreshView().catch(report) : null]);
  }

  async profiles() {
    try {
      return (await call("GET", "/api/profiles")).profiles;
    } catch (error) {
      this.app.reportError(error);
      return [];
    }
  }

  /** @param {boolean} archived */
  async setArchived(archived) {
    try {
      await this.acted(call("POST", `/api/sessions/${this.id}/${archived ? "archive" : "unarchive"}`, {}), archived ? "Archive" : "Unarchive");
      if (this.gone) return;
      this.app.clearError();
      await Promise.all([this.app.refreshNodes([this.id]), this.refreshView()]);
    } catch (error) {
      this.app.reportError(error);
    }
  }

  async remove() {
    const below = this.app.forest().descendants(this.id);
    const what = ["“", userText(this.view.label), "”", below ? ` and the ${plural(below, "session")} below it` : ""];
    const confirmed = await dialog(
      "Delete for good?",
      el("p", { id: "delete-what" }, "This erases ", what, ": records, prompts, memory and insight. It cannot be undone."),
      "Delete",
      { danger: true, signal: this.dialogs.signal },
    );
    if (!confirmed) return;
    try {
      const answer = await this.acted(call("DELETE", `/api/sessions/${this.id}`), "Delete");
      if (!answer) return;
      const { deleted_ids: deleted } = answer;
      this.app.clearError();
      const forest = this.app.forest();
      forest.remove(deleted);
      forest.changed();
      this.app.open(this.view.parent_id);
    } catch (error) {
      this.app.reportError(error);
    }
  }
}

/**
 * What the user typed and the session never took, kept where a gone session's view was: a
 * box to select it in and a Copy button.
 * @param {string} name
 * @param {string} words
 * @param {string} text
 */
function keptText(name, words, text) {
  const box = el("textarea", { id: `kept-${name}-text`, readOnly: true, rows: 4, value: text, "aria-label": words });
  const copy = el("button", { type: "button", id: `kept-${name}-copy` }, "Copy");
  copy.addEventListener("click", async () => {
    box.select();
    try {
      await navigator.clipboard.writeText(text);
      copy.textContent = "Copied";
    } catch {
      copy.textContent = "Selected: press Ctrl+C to copy";
    }
  });
  return el("div", { class: "kept", id: `kept-${name}` }, el("p", {}, words, " Here it is to copy:"), box, copy);
}

/** A metadata key or value as it reads unambiguously in `key=value key=value`: quoted (as
 * JSON) when it is empty or holds a space, "=", a quote or a control character. */
/** @param {string} text */
function quoted(text) {
  return /^[^\s="\\\p{C}]+$/u.test(text) ? text : JSON.stringify(text);
}

/**
 * Why a fork at record `seq` inherits less: the tool calls of record `open.caller` are not all
 * answered by `seq`, and a fork never keeps a tool call without its answer.
 * @param {number} seq
 * @param {{caller: number, answered: number | null}} open
 */
function cutNote(seq, open) {
  return el(
    "p",
    { class: "muted", id: "fork-cut" },
    `#${open.caller}'s tool calls are not all answered by #${seq}, and a fork never keeps a tool call without its answer: this one inherits the records up to #${open.caller - 1}.`,
    open.answered === null ? "" : ` Fork at #${open.answered} to keep the calls and their answers.`,
  );
}

const FORK_SUFFIX = " fork";

/** The label a fork of a session labelled `label` is offered: "LABEL fork", the label cut
 * short ("…") when the whole would be longer than a label may be. */
/** @param {string} label */
function forkLabel(label) {
  const wrapped = isolated(label).length - label.length; // FSI…PDI, when added
  const room = LABEL_MAX - FORK_SUFFIX.length - wrapped;
  const chars = Array.from(label);
  const head = chars.length <= room ? label : `${chars.slice(0, room - 1).join("")}…`;
  return `${isolated(head)}${FORK_SUFFIX}`;
}

/** The fork request the fork dialog's fields ask for. */
/** @param {FormData} form */
function forkBody(form) {
  /** @type {Record<string, unknown>} */
  const body = { label: form.get("label"), context: form.get("context"), request_id: requestId() };
  const until = form.get("inherit_until_seq");
  if (body.context === "inherit" && until) body.inherit_until_seq = Number(until);
  for (const name of ["profile", "system_prompt", "prompt"]) if (form.get(name)) body[name] = form.get(name);
  const vars = parseVars(/** @type {string} */ (form.get("profile_vars") || ""));
  if (Object.keys(vars).length) body.profile_vars = vars;
  return body;
}

/** "a=1\nb=2" as {a: "1", b: "2"} (lines without "=" are skipped). */
/**
 * @param {string} text
 * @returns {Record<string, string>}
 */
function parseVars(text) {
  /** @type {Record<string, string>} */
  const vars = {};
  for (const line of text.split("\n")) {
    const cut = line.indexOf("=");
    if (cut > 0) vars[line.slice(0, cut).trim()] = line.slice(cut + 1);
  }
  return vars;
}
