// The forest: every session of the space as a collapsible tree, drawn as a virtual list.
// Only the rows in view exist in the document (fixed row height), so 10,000 sessions
// scroll as smoothly as ten; flattening runs on load, on a toggle and once per batch of
// live changes (upsert / setStatus / remove, then changed()), never on scroll.

import { el, plural, replace } from "./dom.js";

const ROW_HEIGHT = 26;
const OVERSCAN = 8;

export class Forest {
  /** `onSelect(id)` runs when a row is clicked. */
  constructor(container, onSelect) {
    this.onSelect = onSelect;
    this.nodes = new Map();
    this.children = new Map();
    this.roots = [];
    this.collapsed = new Set();
    this.visible = [];
    this.selected = null;
    this.count = el("div", { class: "forest-count muted" });
    this.spacer = el("div", { class: "forest-spacer" });
    this.rows = el("div", { class: "forest-rows" });
    this.viewport = el("div", { class: "forest-scroll", id: "forest" }, this.spacer, this.rows);
    this.viewport.addEventListener("scroll", () => this.render());
    new ResizeObserver(() => this.render()).observe(this.viewport);
    replace(container, this.count, this.viewport);
  }

  /** Take a new forest (GetTree's pre-order nodes); keeps what was collapsed. */
  load(nodes) {
    this.nodes = new Map(nodes.map((node) => [node.id, node]));
    this.children = new Map();
    this.roots = [];
    for (const node of nodes) {
      const parent = node.parent_id && this.nodes.has(node.parent_id) ? node.parent_id : null;
      if (parent === null) this.roots.push(node.id);
      else {
        if (!this.children.has(parent)) this.children.set(parent, []);
        this.children.get(parent).push(node.id);
      }
    }
    for (const id of [...this.collapsed]) if (!this.nodes.has(id)) this.collapsed.delete(id);
    this.changed();
  }

  /** Add a session (a new root goes last, a child among its siblings by index), or take
   * its new label, status and turn count. Call changed() after a batch. */
  upsert(node) {
    const known = this.nodes.has(node.id);
    this.nodes.set(node.id, node);
    if (known) return;
    const parent = node.parent_id && this.nodes.has(node.parent_id) ? node.parent_id : null;
    if (parent === null) {
      this.roots.push(node.id);
      return;
    }
    if (!this.children.has(parent)) this.children.set(parent, []);
    const kids = this.children.get(parent);
    let at = kids.length;
    while (at > 0 && this.nodes.get(kids[at - 1]).index > node.index) at -= 1;
    kids.splice(at, 0, node.id);
  }

  /** Set a session's status (archive events name no more); whether anything changed. */
  setStatus(id, status) {
    const node = this.nodes.get(id);
    if (!node || node.status === status) return false;
    this.nodes.set(id, { ...node, status });
    return true;
  }

  /** Drop sessions and everything below them. Call changed() after a batch. */
  remove(ids) {
    for (const id of ids) {
      const node = this.nodes.get(id);
      if (!node) continue;
      const siblings = node.parent_id && this.nodes.has(node.parent_id) ? this.children.get(node.parent_id) : this.roots;
      siblings.splice(siblings.indexOf(id), 1);
      const stack = [id];
      while (stack.length) {
        const gone = stack.pop();
        stack.push(...(this.children.get(gone) || []));
        this.nodes.delete(gone);
        this.children.delete(gone);
        this.collapsed.delete(gone);
      }
    }
  }

  /** Redraw after loading or changing sessions: the count line and the visible rows. */
  changed() {
    const total = this.nodes.size;
    this.count.textContent = total
      ? `${plural(total, "session")} in ${plural(this.roots.length, "tree")}`
      : "No sessions yet: create a root.";
    this.flatten();
  }

  /** Say the forest could not be loaded; what was drawn stays, and a link still opens a
   * session. */
  failed(error) {
    this.count.textContent = `The forest could not be loaded (${error}); a session still opens by its link.`;
  }

  get(id) {
    return this.nodes.get(id);
  }

  /** The session's ancestors, nearest first (from the loaded forest: no extra call). */
  ancestors(id) {
    const chain = [];
    let node = this.nodes.get(id);
    while (node && node.parent_id && this.nodes.has(node.parent_id)) {
      node = this.nodes.get(node.parent_id);
      chain.push(node);
    }
    return chain;
  }

  /** How many sessions lie below `id`. */
  descendants(id) {
    let count = 0;
    const stack = [...(this.children.get(id) || [])];
    while (stack.length) {
      count += 1;
      stack.push(...(this.children.get(stack.pop()) || []));
    }
    return count;
  }

  /** Mark `id` as the open session: its ancestors expand and its row scrolls into view. */
  select(id) {
    this.selected = id;
    let opened = false;
    for (const ancestor of this.ancestors(id)) opened = this.collapsed.delete(ancestor.id) || opened;
    if (opened) this.flatten();
    const position = this.visible.indexOf(id);
    if (position >= 0) {
      const top = position * ROW_HEIGHT;
      const { scrollTop, clientHeight } = this.viewport;
      if (top < scrollTop || top + ROW_HEIGHT > scrollTop + clientHeight) {
        this.viewport.scrollTop = Math.max(0, top - clientHeight / 2);
      }
    }
    this.render();
  }

  toggle(id) {
    if (!this.collapsed.delete(id)) this.collapsed.add(id);
    this.flatten();
  }

  /** The ids shown, in pre-order, skipping what lies under collapsed nodes. */
  flatten() {
    const visible = [];
    const stack = [...this.roots].reverse();
    while (stack.length) {
      const id = stack.pop();
      visible.push(id);
      if (this.collapsed.has(id)) continue;
      const kids = this.children.get(id) || [];
      for (let i = kids.length - 1; i >= 0; i -= 1) stack.push(kids[i]);
    }
    this.visible = visible;
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
    this.rows.style.transform = `translateY(${first * ROW_HEIGHT}px)`;
    replace(this.rows, this.visible.slice(first, last).map((id) => this.row(id)));
  }

  row(id) {
    const node = this.nodes.get(id);
    const kids = this.children.get(id) || [];
    const open = !this.collapsed.has(id);
    const toggle = kids.length
      ? el(
          "button",
          {
            type: "button",
            class: "toggle",
            "aria-label": open ? "collapse" : "expand",
            "aria-expanded": String(open),
            onclick: (event) => {
              event.stopPropagation();
              this.toggle(id);
            },
          },
          open ? "▾" : "▸",
        )
      : el("span", { class: "toggle" });
    const classes = ["node"];
    if (node.status === "archived") classes.push("archived");
    if (id === this.selected) classes.push("selected");
    const row = el(
      "div",
      {
        class: classes.join(" "),
        role: "treeitem",
        "aria-selected": String(id === this.selected),
        dataset: { id, status: node.status },
        title: id,
        onclick: () => this.onSelect(id),
      },
      toggle,
      el("span", { class: "label" }, node.label),
      node.status === "archived" ? el("span", { class: "badge" }, "archived") : null,
      el("span", { class: "turns muted" }, plural(node.turn_count, "turn")),
      !open && kids.length ? el("span", { class: "muted" }, `+${this.descendants(id)}`) : null,
    );
    row.style.paddingLeft = `${node.depth * 14 + 4}px`;
    return row;
  }
}
