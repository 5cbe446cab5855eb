// One session: its lineage, meta, system prompt, config, insight and memory, its records
// page by page (the newest first, older ones on request), and the actions on it.

import { call, requestId, stream } from "./api.js";
import { dialog, el, plural, replace, when } from "./dom.js";

const PAGE = 50;

/** The view of one session, drawn into `container`. */
export class SessionView {
  /**
   * `app` gives forest(), reportError(error), refreshForest() and open(id) for
   * navigation after a fork or delete.
   */
  constructor(container, app, id) {
    this.container = container;
    this.app = app;
    this.id = id;
    this.view = null;
    this.oldest = null;
    this.list = el("ol", { class: "records", id: "records" });
    this.older = el(
      "button",
      { type: "button", id: "older", hidden: true, onclick: () => this.loadOlder() },
      "Load older records",
    );
  }

  async show() {
    const [view, page] = await Promise.all([
      call("GET", `/api/sessions/${this.id}`),
      call("GET", `/api/sessions/${this.id}/records?limit=${PAGE}`),
    ]);
    this.view = view;
    this.draw();
    this.addPage(page, false);
  }

  draw() {
    const view = this.view;
    const archived = view.status === "archived";
    replace(
      this.container,
      el(
        "article",
        { class: `session${archived ? " is-archived" : ""}`, dataset: { id: view.id } },
        this.lineage(),
        el(
          "h2",
          {},
          el("span", { id: "session-label" }, view.label),
          " ",
          el("span", { class: `status status-${view.status}`, id: "session-status" }, view.status),
        ),
        this.meta(),
        view.source_session_id ? this.source(view.source_session_id) : null,
        this.actions(archived),
        this.slots(archived),
        el("h3", {}, "Records"),
        this.older,
        this.list,
        this.sendBox(archived),
      ),
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
      el("code", {}, view.id),
    );
  }

  /** Re-read the view after a turn: the turn count and last activity changed. */
  async refreshMeta() {
    this.view = await call("GET", `/api/sessions/${this.id}`);
    this.container.querySelector("#session-meta")?.replaceWith(this.meta());
  }

  lineage() {
    const chain = this.app.forest().ancestors(this.id).reverse();
    if (!chain.length) return el("nav", { class: "lineage muted" }, "Root session");
    const links = [];
    for (const node of chain) {
      links.push(el("a", { href: `#/session/${node.id}` }, node.label), " › ");
    }
    return el("nav", { class: "lineage", id: "lineage", "aria-label": "lineage" }, links, this.view.label);
  }

  source(sourceId) {
    const node = this.app.forest().get(sourceId);
    return el(
      "p",
      { class: "muted" },
      "Forked from ",
      el("a", { href: `#/session/${sourceId}` }, node ? node.label : sourceId),
    );
  }

  actions(archived) {
    return el(
      "div",
      { class: "actions" },
      el("button", { type: "button", id: "fork", onclick: () => this.fork(null) }, "Fork…"),
      archived
        ? el("button", { type: "button", id: "unarchive", onclick: () => this.setArchived(false) }, "Unarchive")
        : el("button", { type: "button", id: "archive", onclick: () => this.setArchived(true) }, "Archive"),
      el("button", { type: "button", id: "delete", class: "danger", onclick: () => this.remove() }, "Delete…"),
    );
  }

  slots(archived) {
    const view = this.view;
    const config = view.config;
    const skills = !config || config.skills === null ? "inherited (all)" : config.skills.join(", ") || "none";
    return el(
      "div",
      { class: "slots" },
      el(
        "details",
        { open: true },
        el("summary", {}, "System prompt"),
        el("pre", { class: "text", id: "system-prompt" }, view.system_prompt ?? "(none)"),
      ),
      el(
        "details",
        {},
        el("summary", {}, "Config"),
        el(
          "dl",
          { id: "config" },
          el("dt", {}, "system prompt"),
          el("dd", {}, el("pre", { class: "text" }, config?.system_prompt ?? "(not set)")),
          el("dt", {}, "skills"),
          el("dd", {}, skills),
        ),
      ),
      this.slotEditor("insight", "Insight (one-shot note for the next turn)", view.insight, archived),
      this.slotEditor("memory", "Memory", view.memory, false),
    );
  }

  slotEditor(name, title, value, readOnly) {
    const text = el("textarea", { id: `${name}-text`, rows: 2, value: value ?? "", disabled: readOnly });
    const save = el("button", { type: "button", id: `save-${name}`, disabled: readOnly }, "Save");
    save.addEventListener("click", async () => {
      save.disabled = true;
      try {
        await call("PUT", `/api/sessions/${this.id}/${name}`, { content: text.value });
        save.textContent = "Saved";
      } catch (error) {
        this.app.reportError(error);
      } finally {
        save.disabled = false;
      }
    });
    text.addEventListener("input", () => {
      save.textContent = "Save";
    });
    return el("details", { open: Boolean(value) }, el("summary", {}, title), text, save);
  }

  /** Add records: an older page at the top, a turn's new ones at the bottom. */
  addPage(page, older) {
    this.list.querySelector(".empty")?.remove();
    const items = page.records.map((record) => this.recordItem(record));
    if (older) this.list.prepend(...items);
    else this.list.append(...items);
    if (page.records.length && (older || this.oldest === null)) this.oldest = page.records[0].seq;
    if (page.older !== undefined) this.older.hidden = !page.older;
    if (!this.list.children.length) this.list.append(el("li", { class: "empty muted" }, "No records yet."));
  }

  async loadOlder() {
    this.older.disabled = true;
    try {
      const page = await call("GET", `/api/sessions/${this.id}/records?limit=${PAGE}&before=${this.oldest}`);
      this.addPage(page, true);
    } catch (error) {
      this.app.reportError(error);
    } finally {
      this.older.disabled = false;
    }
  }

  recordItem(record) {
    const head = el(
      "div",
      { class: "record-head" },
      el("span", { class: "seq" }, `#${record.seq}`),
      el("span", { class: "role" }, record.role),
      record.inherited ? el("span", { class: "badge inherited", title: "read from the source session" }, "inherited") : null,
      record.tool_call_id ? el("span", { class: "muted" }, `answers ${record.tool_call_id}`) : null,
      el("span", { class: "grow" }),
      el("span", { class: "muted" }, when(record.created_at)),
      el(
        "button",
        { type: "button", class: "fork-here", title: "fork with the records up to this one", onclick: () => this.fork(record.seq) },
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

  sendBox(archived) {
    const text = el("textarea", {
      id: "message",
      rows: 3,
      placeholder: archived ? "Archived: unarchive it to send" : "Message (Ctrl+Enter sends)",
      disabled: archived,
    });
    const button = el("button", { type: "submit", id: "send", class: "primary", disabled: archived }, "Send");
    const form = el("form", { class: "send", onsubmit: (event) => this.send(event, text, button) }, text, button);
    text.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
    });
    return form;
  }

  async send(event, text, button) {
    event.preventDefault();
    const content = text.value;
    if (!content.trim()) return;
    button.disabled = true;
    this.list.querySelector(".empty")?.remove();
    const pendingUser = el("li", { class: "record role-user pending" }, el("div", { class: "record-head" }, el("span", { class: "role" }, "user")), el("div", { class: "content" }, content));
    const reply = el("div", { class: "content", id: "streaming" });
    const calls = el("ul", { class: "tool-calls" });
    const pendingReply = el("li", { class: "record role-assistant pending" }, el("div", { class: "record-head" }, el("span", { class: "role" }, "assistant"), el("span", { class: "muted" }, "streaming…")), reply, calls);
    this.list.append(pendingUser, pendingReply);
    pendingReply.scrollIntoView({ block: "nearest" });
    let done = null;
    let failure = null;
    try {
      await stream(`/api/sessions/${this.id}/send`, { content, request_id: requestId() }, (name, data) => {
        if (name === "delta") reply.append(data.text);
        else if (name === "tool_call") calls.append(el("li", {}, `→ ${data.name}(${data.arguments_json})`));
        else if (name === "done") done = data;
        else if (name === "error") failure = data;
      });
    } catch (error) {
      failure = { code: error.code, message: error.message };
    }
    button.disabled = false;
    if (done) {
      pendingUser.remove();
      pendingReply.remove();
      this.addPage({ records: done.records }, false);
      text.value = "";
      await Promise.all([this.app.refreshForest(), this.refreshMeta().catch((e) => this.app.reportError(e))]);
    } else {
      const message = failure ? `${failure.code}: ${failure.message}` : "the stream ended without a reply";
      pendingReply.replaceChildren(el("div", { class: "record-head" }, el("span", { class: "role" }, "not stored")), el("div", { class: "content error-text" }, message));
      pendingUser.classList.add("failed");
      this.app.reportError({ toString: () => message });
    }
  }

  async fork(seq) {
    const profiles = await this.profiles();
    const context = el(
      "select",
      { name: "context", id: "fork-context" },
      el("option", { value: "inherit" }, seq === null ? "inherit all records" : `inherit records up to #${seq}`),
      el("option", { value: "none" }, "none (start empty)"),
      el("option", { value: "compress" }, "compress (summary in the system prompt)"),
    );
    const upTo = el("input", { name: "inherit_until_seq", id: "fork-up-to", type: "number", min: "0", value: seq === null ? "" : String(seq), placeholder: "all" });
    context.addEventListener("change", () => {
      upTo.disabled = context.value !== "inherit";
    });
    const profile = el("select", { name: "profile", id: "fork-profile" }, el("option", { value: "" }, "(no profile)"), profiles.map((p) => el("option", { value: p.name }, p.name)));
    const form = await dialog(
      seq === null ? `Fork “${this.view.label}”` : `Fork “${this.view.label}” at #${seq}`,
      el(
        "div",
        { class: "fields" },
        el("label", {}, "Label", el("input", { name: "label", id: "fork-label", required: true, maxlength: "200", value: `${this.view.label} fork` })),
        el("label", {}, "Context", context),
        el("label", {}, "Up to seq", upTo),
        el("label", {}, "Profile", profile),
        el("label", {}, "Variables (name=value, one a line)", el("textarea", { name: "profile_vars", id: "fork-vars", rows: 2 })),
        el("label", {}, "System prompt", el("textarea", { name: "system_prompt", id: "fork-system-prompt", rows: 2 })),
        el("label", {}, "Opening message", el("input", { name: "prompt", id: "fork-prompt" })),
      ),
      "Fork",
    );
    if (!form) return;
    const body = { label: form.get("label"), context: form.get("context"), request_id: requestId() };
    const until = form.get("inherit_until_seq");
    if (body.context === "inherit" && until) body.inherit_until_seq = Number(until);
    for (const name of ["profile", "system_prompt", "prompt"]) if (form.get(name)) body[name] = form.get(name);
    const vars = parseVars(form.get("profile_vars") || "");
    if (Object.keys(vars).length) body.profile_vars = vars;
    try {
      const child = await call("POST", `/api/sessions/${this.id}/fork`, body);
      await this.app.refreshForest();
      this.app.open(child.id);
    } catch (error) {
      this.app.reportError(error);
    }
  }

  async profiles() {
    try {
      return (await call("GET", "/api/profiles")).profiles;
    } catch (error) {
      this.app.reportError(error);
      return [];
    }
  }

  async setArchived(archived) {
    try {
      await call("POST", `/api/sessions/${this.id}/${archived ? "archive" : "unarchive"}`, {});
      await this.app.refreshForest();
      await this.app.reopen();
    } catch (error) {
      this.app.reportError(error);
    }
  }

  async remove() {
    const below = this.app.forest().descendants(this.id);
    const what = below ? `“${this.view.label}” and the ${plural(below, "session")} below it` : `“${this.view.label}”`;
    const confirmed = await dialog(
      "Delete for good?",
      el("p", { id: "delete-what" }, `This erases ${what}: records, prompts, memory and insight. It cannot be undone.`),
      "Delete",
      { danger: true },
    );
    if (!confirmed) return;
    try {
      await call("DELETE", `/api/sessions/${this.id}`);
      const parent = this.view.parent_id;
      await this.app.refreshForest();
      this.app.open(parent);
    } catch (error) {
      this.app.reportError(error);
    }
  }
}

/** "a=1\nb=2" as {a: "1", b: "2"} (lines without "=" are skipped). */
function parseVars(text) {
  const vars = {};
  for (const line of text.split("\n")) {
    const cut = line.indexOf("=");
    if (cut > 0) vars[line.slice(0, cut).trim()] = line.slice(cut + 1);
  }
  return vars;
}
