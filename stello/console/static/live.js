// Live updates: the page follows the space's changes through the gateway's WatchSpace
// stream. The gateway has no WatchSpace yet (issue #21), so this module only says so;
// nothing polls in its place. Refresh reloads the forest and the open view.

/** Show whether live updates run, and why not. */
export function showLive(node, config) {
  node.textContent = config.live ? "live" : "live updates: off";
  node.title = config.live_note || "";
  node.classList.toggle("live-on", Boolean(config.live));
}
