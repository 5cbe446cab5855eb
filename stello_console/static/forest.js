// The forest: every session of the space as a collapsible tree, drawn as a virtual list.
// Only the rows in view exist in the document (fixed row height), so 10,000 sessions
// scroll as smoothly as ten; flattening runs on load, on a toggle, on a change of the
// filter and once per batch of live changes (upsert / setStatus / remove, then
// changed()), never on scroll.
//
// It is an ARIA tree for the keyboard: one Tab stop (the focused row, roving tabindex),
// Up/Down/Home/End move, Right expands or enters, Left collapses or goes to the parent,
// Enter or Space opens; a row keeps the focus when the list is redrawn under it. The
// filter shows the sessions whose label (or a word of it) starts with the text typed
// (case and accents aside, as search reads them), with their ancestors for context.

import { el, fold, plural, replace } from "./dom.js";

// Taller rows where the pointer is a finger.
const ROW_HEIGHT = matchMedia("(pointer: coarse)").matches ? 40 : 26;
const OVERSCAN = 8;
// Rows indent one step a level down to this depth; deeper ones indent no further and show
// their depth instead, so a label and its turn count fit the pane at any depth.
const INDENT_LEVELS = 8;
const INDENT_PX = 14;

/**
 * A session of the forest (/api/tree's and /api/nodes' nodes).
 * @typedef {object} ForestNode
 * @property {string} id
 * @property {string | null} parent_id
 * @property {string} label
 * @property {string} status
 * @property {number} turn_count
 * @property {number} depth
 * @property {number} index its place among its siblings
 */

export class Forest {
  /**
   * `onSelect(id)` runs when a row is clicked.
   * @param {HTMLElement} container
   * @param {(id: string) => void} onSelect
   */
  constructor(container, onSelect) {
    this.onSelect = onSelect;
    /** @type {Map<string, ForestNode>} */
    this.nodes = new Map();
    /** @type {Map<string, string[]>} */
    this.children = new Map();
    /** @type {string[]} */
    this.roots = [];
    /** @type {Set<string>} */
    this.collapsed = new Set();
    /** @type {string[]} */
    this.visible = [];
    /** @type {string | null} */
    this.selected = null;
    /** @type {Map<string | null, number>} */
    this.positions = new Map(); // id -> its place in `visible`
    /** @type {string | null} */
    this.focused = null; // the row the keyboard is on (the tree's one Tab stop)
    this.filter = "";
    /** @type {Set<string> | null} */
    this.matches = null; // with a filter: the ids whose label matches
    this.count = el("div", { class: "forest-count muted", id: "forest-count", "aria-live": "polite" });
    this.filterBox = el("input", {
      type: "search",
      id: "forest-filter",
      placeholder: "Filter by label…",
      "aria-label": "Filter sessions by label",
      autocomplete: "off",
      oninput: () => this.setFilter(this.filterBox.value),
    });
    this.spacer = el("div", { class: "forest-spacer" });
    this.rows = el("div", {
      class: "forest-rows",
      role: "tree",
      "aria-label": "Sessions",
      onkeydown: (/** @type {KeyboardEvent} */ event) => this.onKey(event),
    });
    this.viewport = el("div", { class: "forest-scroll", id: "forest" }, this.spacer, this.rows);
    this.viewport.addEventListener("scroll", () => this.render());
    new ResizeObserver(() => this.render()).observe(this.viewport);
    this.tools = el("div", { class: "forest-tools" }, this.filterBox);
    replace(container, this.tools, this.count, this.viewport);
  }

  /** Put `node` (the go-to box) beside the filter. */
  /** @param {Node} node */
  addTool(node) {
    this.tools.append(node);
  }

  /** Take a new forest (GetTree's pre-order nodes); keeps what was collapsed. */
  /** @param {ForestNode[]} nodes */
  load(nodes) {
    this.nodes = new Map(nodes.map((node) => [node.id, node]));
    this.children = new Map();
    this.roots = [];
    for (const node of nodes) {
      const parent = node.parent_id && this.nodes.has(node.parent_id) ? node.parent_id : null;
      if (parent === null) this.roots.push(node.id);
      else this.kidsOf(parent).push(node.id);
    }
    for (const id of [...this.collapsed]) if (!this.nodes.has(id)) this.collapsed.delete(id);
    this.changed();
  }

  /** Add a session (a new root goes last, a child among its siblings by index), or take
   * its new label, status and turn count. Call changed() after a batch. */
  /** @param {ForestNode} node */
  upsert(node) {
    const known = this.nodes.has(node.id);
    this.nodes.set(node.id, node);
    if (known) return;
    const parent = node.parent_id && this.nodes.has(node.parent_id) ? node.parent_id : null;
    if (parent === null) {
      this.roots.push(node.id);
      return;
    }
    const kids = this.kidsOf(parent);
    let at = kids.length;
    while (at > 0 && this.known(kids[at - 1]).index > node.index) at -= 1;
    kids.splice(at, 0, node.id);
  }

  /**
   * The children of `parent` (a list made for it on its first child).
   * @param {string} parent
   */
  kidsOf(parent) {
    if (!this.children.has(parent)) this.children.set(parent, []);
    return /** @type {string[]} */ (this.children.get(parent));
  }

  /**
   * A session the forest holds (`id` is one of its nodes' or lists').
   * @param {string} id
   */
  known(id) {
    return /** @type {ForestNode} */ (this.nodes.get(id));
  }

  /** Set a session's status (archive events name no more); whether anything changed. */
  /**
   * @param {string} id
   * @param {string} status
   */
  setStatus(id, status) {
    const node = this.nodes.get(id);
    if (!node || node.status === status) return false;
    this.nodes.set(id, { ...node, status });
    return true;
  }

  /** Drop sessions and everything below them. Call changed() after a batch. */
  /** @param {string[]} ids */
  remove(ids) {
    for (const id of ids) {
      const node = this.nodes.get(id);
      if (!node) continue;
      const siblings = /** @type {string[]} */ (node.parent_id && this.nodes.has(node.parent_id) ? this.children.get(node.parent_id) : this.roots);
      siblings.splice(siblings.indexOf(id), 1);
      const stack = [id];
      while (stack.length) {
        const gone = /** @type {string} */ (stack.pop());
        stack.push(...(this.children.get(gone) || []));
        this.nodes.delete(gone);
        this.children.delete(gone);
        this.collapsed.delete(gone);
      }
    }
  }

  /** Redraw after loading or changing sessions: the count line and the visible rows. */
  changed() {
    this.flatten();
    const total = this.nodes.size;
    if (this.matches !== null && total) {
      this.count.textContent = this.matches.size
        ? `${this.matches.size} of ${plural(total, "session")} match “${this.filter}”`
        : `No label starts with “${this.filter}” (${plural(total, "session")})`;
      return;
    }
    this.count.textContent = total
      ? `${plural(total, "session")} in ${plural(this.roots.length, "tree")}`
      : "No sessions yet: create a root.";
  }

  /** Show only the sessions whose label, or a word of it, starts with `text` (any case,
   * accents as search reads them: "cafe" keeps "café"), with their ancestors; "" shows every
   * session again. */
  /** @param {string} text */
  setFilter(text) {
    this.filter = text.trim();
    this.changed();
  }

  /** The ids the filter keeps (matches and their ancestors), or null without a filter. */
  kept() {
    this.matches = null;
    if (!this.filter) return null;
    const wanted = fold(this.filter);
    this.matches = new Set();
    const kept = new Set();
    for (const [id, node] of this.nodes) {
      const label = fold(node.label);
      if (!label.startsWith(wanted) && !label.split(/\s+/).some((word) => word.startsWith(wanted))) continue;
      this.matches.add(id);
      kept.add(id);
      for (const ancestor of this.ancestors(id)) kept.add(ancestor.id);
    }
    return kept;
  }

  /** Say the forest could not be loaded; what was drawn stays, and a link still opens a
   * session. */
  /** @param {unknown} error */
  failed(error) {
    this.count.textContent = `The forest could not be loaded (${error}); a session still opens by its link.`;
  }

  /** @param {string} id */
  get(id) {
    return this.nodes.get(id);
  }

  /** The session's ancestors, nearest first (from the loaded forest: no extra call). */
  /** @param {string | null} id */
  ancestors(id) {
    const chain = [];
    let node = id === null ? undefined : this.nodes.get(id);
    while (node && node.parent_id && this.nodes.has(node.parent_id)) {
      node = this.known(node.parent_id);
      chain.push(node);
    }
    return chain;
  }

  /** How many sessions lie below `id`. */
  /** @param {string} id */
  descendants(id) {
    let count = 0;
    const stack = [...(this.children.get(id) || [])];
    while (stack.length) {
      count += 1;
      stack.push(...(this.children.get(/** @type {string} */ (stack.pop())) || []));
    }
    return count;
  }

  /** Mark `id` as the open session: its ancestors expand and its row scrolls into view. */
  /** @param {string | null} id */
  select(id) {
    this.selected = id;
    if (id !== null) this.focused = id;
    let opened = false;
    for (const ancestor of this.ancestors(id)) opened = this.collapsed.delete(ancestor.id) || opened;
    if (opened) this.flatten();
    const position = this.positions.get(id) ?? -1;
    if (position >= 0) {
      const top = position * ROW_HEIGHT;
      const { scrollTop, clientHeight } = this.viewport;
      if (top < scrollTop || top + ROW_HEIGHT > scrollTop + clientHeight) {
        this.viewport.scrollTop = Math.max(0, top - clientHeight / 2);
      }
    }
    this.render();
  }

  /** The children a row of `id` folds: all of them, or those a filter keeps (a match whose
   * children it hides has nothing to show below it). */
  /** @param {string} id */
  folds(id) {
    const kids = this.children.get(id) || [];
    return this.matches === null ? kids : kids.filter((kid) => this.positions.has(kid));
  }

  /** @param {string} id */
  toggle(id) {
    if (this.matches !== null) return; // a filter shows every match: nothing to fold
    if (!this.collapsed.delete(id)) this.collapsed.add(id);
    this.flatten();
  }

  /** The ids shown, in pre-order, skipping what lies under collapsed nodes (with a
   * filter: every kept node, whatever is collapsed). */
  flatten() {
    const kept = this.kept();
    const visible = [];
    const stack = [...this.roots].reverse();
    while (stack.length) {
      const id = /** @type {string} */ (stack.pop());
      if (kept !== null && !kept.has(id)) continue;
      visible.push(id);
      if (kept === null && this.collapsed.has(id)) continue;
      const kids = this.children.get(id) || [];
      for (let i = kids.length - 1; i >= 0; i -= 1) stack.push(kids[i]);
    }
    this.visible = visible;
    this.positions = new Map(visible.map((id, at) => [id, at]));
    this.spacer.style.height = `${visible.length * ROW_HEIGHT}px`;
    this.render();
  }

  render() {
    const { scrollTop, clientHeight } = this.viewport;
    const first = Math.max(0, Math.floor(scrollTop / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(
      this.visible.length,
      Math.ceil((scrollTop + clientHeight) / ROW_HEIGHT) + OVERSCAN,
    );
    const hadFocus = this.rows.contains(document.activeElement);
    if (!this.positions.has(this.focused)) this.focused = this.positions.has(this.selected) ? this.selected : (this.visible[0] ?? null);
    this.rows.style.transform = `translateY(${first * ROW_HEIGHT}px)`;
    const rows = this.visible.slice(first, last).map((id) => this.row(id));
    // The Tab stop must exist even when the focused row is scrolled out of the drawn range.
    const at = this.positions.get(this.focused);
    if (at !== undefined && (at < first || at >= last)) rows.push(this.row(/** @type {string} */ (this.focused), at - first));
    replace(this.rows, rows);
    if (hadFocus) this.rowOf(this.focused)?.focus({ preventScroll: true });
  }

  /**
   * @param {string | null} id
   * @returns {HTMLElement | null}
   */
  rowOf(id) {
    return id === null ? null : this.rows.querySelector(`[data-id="${CSS.escape(id)}"]`);
  }

  /** Move the keyboard to row `id`: scrolled into view, drawn, focused. */
  /** @param {string | null | undefined} id */
  focusRow(id) {
    if (id === undefined || id === null) return;
    this.focused = id;
    const top = /** @type {number} */ (this.positions.get(id)) * ROW_HEIGHT;
    const { scrollTop, clientHeight } = this.viewport;
    if (top < scrollTop) this.viewport.scrollTop = top;
    else if (top + ROW_HEIGHT > scrollTop + clientHeight) this.viewport.scrollTop = top + ROW_HEIGHT - clientHeight;
    this.render();
    this.rowOf(id)?.focus({ preventScroll: true });
  }

  /** The tree's keys (WAI-ARIA tree view pattern). */
  /** @param {KeyboardEvent} event */
  onKey(event) {
    const id = this.focused;
    const at = this.positions.get(id);
    if (id === null || at === undefined || event.altKey || event.ctrlKey || event.metaKey) return;
    const node = this.known(id);
    const kids = this.folds(id);
    const open = kids.length > 0 && (this.matches !== null || !this.collapsed.has(id));
    /** @type {Record<string, () => void>} */
    const moves = {
      ArrowDown: () => this.focusRow(this.visible[at + 1]),
      ArrowUp: () => this.focusRow(this.visible[at - 1]),
      Home: () => this.focusRow(this.visible[0]),
      End: () => this.focusRow(this.visible[this.visible.length - 1]),
      ArrowRight: () => {
        if (kids.length && !open) this.toggle(id);
        else if (open) this.focusRow(this.visible[at + 1]);
      },
      ArrowLeft: () => {
        if (open && this.matches === null) this.toggle(id);
        else if (node.parent_id && this.positions.has(node.parent_id)) this.focusRow(node.parent_id);
      },
      Enter: () => this.onSelect(id),
      " ": () => this.onSelect(id),
    };
    const move = moves[event.key];
    if (!move) return;
    event.preventDefault();
    move();
  }

  /**
   * One row; `offset` (rows from the first drawn) places a row drawn out of order.
   * @param {string} id
   * @param {number | null} offset
   */
  row(id, offset = null) {
    const node = this.known(id);
    const kids = this.folds(id);
    const open = this.matches !== null || !this.collapsed.has(id);
    // For the pointer (mouse or finger): the keyboard folds with Left and Right.
    const toggle = kids.length
      ? el(
          "span",
          {
            class: "toggle",
            "aria-hidden": "true",
            title: open ? "collapse" : "expand",
            onclick: (/** @type {MouseEvent} */ event) => {
              event.stopPropagation();
              this.focused = id;
              this.toggle(id);
            },
          },
          open ? "▾" : "▸",
        )
      : el("span", { class: "toggle", "aria-hidden": "true" });
    const classes = ["node"];
    if (node.status === "archived") classes.push("archived");
    if (id === this.selected) classes.push("selected");
    if (this.matches !== null) classes.push(this.matches.has(id) ? "match" : "context");
    const row = el(
      "div",
      {
        class: classes.join(" "),
        role: "treeitem",
        tabindex: id === this.focused ? "0" : "-1",
        "aria-level": String(node.depth + 1),
        "aria-selected": String(id === this.selected),
        "aria-expanded": kids.length ? String(open) : null,
        dataset: { id, status: node.status },
        title: id,
        onclick: () => {
          this.focused = id;
          this.onSelect(id);
        },
      },
      toggle,
      node.depth > INDENT_LEVELS ? el("span", { class: "badge depth", title: `depth ${node.depth}` }, `${node.depth}`) : null,
      el("bdi", { class: "label" }, node.label),
      node.status === "archived" ? el("span", { class: "badge" }, "archived") : null,
      el("span", { class: "turns muted" }, plural(node.turn_count, "turn")),
      !open && kids.length ? el("span", { class: "muted" }, `+${this.descendants(id)}`) : null,
    );
    row.style.paddingLeft = `${Math.min(node.depth, INDENT_LEVELS) * INDENT_PX + 4}px`;
    row.style.height = `${ROW_HEIGHT}px`;
    if (offset !== null) {
      row.style.position = "absolute";
      row.style.top = `${offset * ROW_HEIGHT}px`;
      row.style.left = "0";
      row.style.right = "0";
    }
    return row;
  }
}
