// Building the page from data: every text from a model or a user goes in as a text node
// (append / textContent), never as markup. The page's Content Security Policy enforces
// Trusted Types, so assigning markup to any HTML sink would throw rather than parse.

/**
 * What append() takes: nodes, texts (numbers too), nested arrays of them; null, undefined
 * and false are skipped.
 * @typedef {Node | string | number | boolean | null | undefined | any[]} Child
 */

/**
 * A new element: `props` are attributes (class, dataset, on<event> listeners, and DOM
 * properties such as value or disabled when not a string); children are nodes or text.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, any>} props
 * @param {Child[]} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "value") /** @type {HTMLInputElement} */ (node).value = value; // a textarea's text is its property only
    else if (typeof value !== "string" && name in node) /** @type {any} */ (node)[name] = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

/**
 * Append nodes and texts (nested arrays flattened; null and false skipped).
 * @param {ParentNode} node
 * @param {Child} children
 */
export function append(node, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
}

/** A user's or a model's text inside other words: isolated (<bdi>), so a bidi override in it
 * (U+202E, say) cannot reorder the words around it.
 * @param {string} text
 * @param {Record<string, any>} props
 */
export function userText(text, props = {}) {
  return el("bdi", props, text);
}

// Bidi embeddings, overrides and isolates: a text holding one cannot be shown isolated in
// an <input>'s value, so such a default value is wrapped in FSI…PDI (first strong isolate).
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/;

/**
 * `text` as it can stand inside a longer field value without reordering the rest.
 * @param {string} text
 */
export function isolated(text) {
  return BIDI_CONTROLS.test(text) ? `\u2068${text}\u2069` : text;
}

const TITLE = "Stello console";

/**
 * The browser tab's title: what the page shows (a session's label), then the console's name;
 * the console's name alone without `shown`.
 * @param {string} [shown]
 */
export function setTitle(shown = "") {
  document.title = shown ? `${isolated(shown)} · ${TITLE}` : TITLE;
}

/**
 * Replace every child of `node`.
 * @param {ParentNode} node
 * @param {Child[]} children
 */
export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

/**
 * "1 turn", "3 turns".
 * @param {number} count
 * @param {string} word
 */
export function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

// The letters with a stroke or bar that have no canonical decomposition, and their base
// letters (storage_service/search/letters.py, STROKED and STROKED_BASES: search reads them so).
const STROKED = "ØøĐđÐðĦħŁłŦŧıĿŀſɃƀƵƶǤǥ";
const STROKED_BASES = "OoDdDdHhLlTtiLlsBbZzGg";

/**
 * A text as search reads it, for comparing: lower case, a letter's accents removed and a
 * stroked letter read as its base ("Café" and "cafe" are "cafe", "Łódź" is "lodz").
 * @param {string} text
 */
export function fold(text) {
  const bare = text.normalize("NFD").replace(/\p{M}/gu, "");
  return Array.from(bare, (char) => {
    const at = STROKED.indexOf(char);
    return at < 0 ? char : STROKED_BASES[at];
  })
    .join("")
    .toLowerCase();
}

/**
 * An ISO time as the browser's local date and time ("" when none).
 * @param {string | null | undefined} iso
 */
export function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

let dialogs = 0;
/** @type {Set<HTMLDialogElement>} the dialogs on screen */
const openDialogs = new Set();

/** Close every dialog on screen, as Cancel would (the page signs out under them). */
export function closeDialogs() {
  for (const box of openDialogs) box.close("cancel");
}

/**
 * A modal dialog with `content`; resolves with the submitted FormData, or null. Enter in a
 * field submits (the submit button is the form's only one), Escape or Cancel closes it;
 * the focus starts on the first field and returns where it was. With `act`, a submit runs
 * `act(data)` with the dialog open: it closes resolving with what `act` returned, or, when
 * `act` throws (or its promise rejects), stays open with what was typed and says why in the
 * dialog. An abort of `signal` closes it as Cancel does (what it was about is gone).
 * @param {Child} title
 * @param {Child} content
 * @param {string} submitLabel
 * @param {{danger?: boolean, act?: (data: FormData) => Promise<unknown>, signal?: AbortSignal}} [options]
 * @returns {Promise<any>}
 */
export function dialog(title, content, submitLabel, { danger = false, act, signal } = {}) {
  return new Promise((resolve) => {
    const titleId = `dialog-title-${++dialogs}`;
    /** @type {HTMLDialogElement | null} */
    let box = null;
    /** @type {unknown} */
    let result = null;
    const problem = el("p", { class: "dialog-error", role: "alert" });
    problem.hidden = true;
    const submit = el("button", { type: "submit", value: "ok", class: danger ? "danger" : "primary" }, submitLabel);
    const form = el(
      "form",
      { method: "dialog", class: "dialog-form" },
      el("h3", { id: titleId }, title),
      content,
      problem,
      el("div", { class: "dialog-actions" }, el("button", { type: "button", onclick: () => box?.close("cancel") }, "Cancel"), submit),
    );
    if (act) {
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        submit.disabled = true;
        const data = new FormData(form);
        // A check that throws at once is said like a refusal.
        Promise.resolve()
          .then(() => act(data))
          .then(
            (done) => {
              result = done;
              box?.close("ok");
            },
            (error) => {
              submit.disabled = false;
              problem.textContent = String(error);
              problem.hidden = false;
            },
          );
      });
    }
    box = el("dialog", { "aria-labelledby": titleId }, form);
    box.addEventListener("close", () => {
      const ok = box.returnValue === "ok";
      openDialogs.delete(box);
      box.remove();
      resolve(act ? result : ok ? new FormData(form) : null);
    });
    if (signal?.aborted) {
      resolve(null);
      return;
    }
    signal?.addEventListener("abort", () => box?.close("cancel"), { once: true });
    document.body.append(box);
    openDialogs.add(box);
    box.showModal();
  });
}
