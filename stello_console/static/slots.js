// An insight or memory editor of the session view.

import { call } from "./api.js";
import { el } from "./dom.js";

/** An insight or memory editor; a live change replaces its text unless it is being edited. */
export class SlotEditor {
  /**
   * @param {import("./session.js").SessionView} session
   * @param {"insight" | "memory"} name
   * @param {string} title
   * @param {string | null | undefined} value
   * @param {boolean} readOnly
   */
  constructor(session, name, title, value, readOnly) {
    this.text = el("textarea", { id: `${name}-text`, rows: 2, value: value ?? "", disabled: readOnly, "aria-label": title });
    this.saved = value ?? "";
    this.save = el("button", { type: "button", id: `save-${name}`, disabled: readOnly }, "Save");
    this.save.addEventListener("click", async () => {
      this.save.disabled = true;
      const content = this.text.value;
      try {
        if (!(await session.acted(call("PUT", `/api/sessions/${session.id}/${name}`, { content }), "Save"))) return;
        this.saved = content;
        this.save.textContent = "Saved";
        session.app.clearError();
      } catch (error) {
        session.app.reportError(error);
      } finally {
        this.save.disabled = this.text.disabled;
      }
    });
    this.text.addEventListener("input", () => {
      this.save.textContent = "Save";
    });
    this.node = el("details", { open: Boolean(value) }, el("summary", {}, title), this.text, this.save);
  }

  /** The stored value changed: show it, unless the user has unsaved text here. */
  /**
   * @param {string | null | undefined} value
   * @param {boolean} readOnly
   */
  take(value, readOnly) {
    const stored = value ?? "";
    if (this.text.value === this.saved) this.text.value = stored;
    this.saved = stored;
    this.text.disabled = readOnly;
    this.save.disabled = readOnly;
  }
}

