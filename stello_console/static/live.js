// Live updates: the page follows the space's changes through the console's relay of
// WatchSpace (/api/events). The stream is read with fetch, not EventSource, so a deployed
// console can send its key in a header. Events name ids, kinds and seqs only; the app
// refetches just what they name. The cursor of the last event received resumes the
// stream after a break (Last-Event-ID), so nothing is lost or applied twice; a stream
// that starts from now (the first, or after an expired cursor) reloads the view first.
//
// One stream per browser and sign-in, not per tab: a browser keeps six HTTP/1.1
// connections per host:port for all its tabs, so a stream per tab would let six tabs take
// them all and freeze every tab. The tabs of one sign-in elect a leader with a Web Lock;
// the leader reads the stream and relays its events and its state (for the badge) over a
// BroadcastChannel. When the leader goes, the next tab in the lock's queue takes over
// from the last cursor it heard. A browser without Web Locks reads a stream per tab.
// A sign-out of the local console is the browser's: the tab that signs out tells the others
// over the same channel's name, and each stops at once (the console also ends the streams).

import { ApiError, keyRefused, refusedOnStream, stream } from "./api.js";

const RETRY_MS = [250, 500, 1000, 2000, 5000, 10000];
const LABELS = {
  connecting: "live: connecting…",
  live: "live",
  reconnecting: "live: reconnecting…",
  off: "live updates: off",
};

/**
 * Why the stream is not live (a refusal, a break), and what comes next.
 * @typedef {{code: string, message: string, reason?: string | null, then?: string}} Detail
 */
/** @typedef {keyof typeof LABELS} State */

export class Live {
  /**
   * `app` gives resync() (reload the forest and the open view; false when it failed),
   * recover() (reload what failed while the stream was down), apply(events) and
   * reportError(error). `identity` names the sign-in whose tabs share one stream.
   * @param {HTMLElement} indicator
   * @param {import("./app.js").App} app
   * @param {string} identity
   */
  constructor(indicator, app, identity = "") {
    this.indicator = indicator;
    this.app = app;
    this.name = `stello_console.live.${identity}`;
    this.shared = Boolean(identity && navigator.locks && window.BroadcastChannel);
    this.leading = !this.shared;
    this.channel = null;
    /** @type {((value?: unknown) => void) | null} */
    this.unlock = null;
    this.unqueue = new AbortController();
    this.cursor = null;
    /** @type {any[]} events, and {resync} or {recover} marks, to apply in order */
    this.queue = [];
    this.draining = false;
    this.stopped = false;
    this.failures = 0;
    this.generation = 0;
    this.readied = false;
    this.connected = false;
    this.state = null;
    this.detail = null;
    this.controller = null;
    /** @type {number | undefined} */
    this.timer = undefined;
    /** @type {(contact: boolean) => void} */
    this.contacted = () => {}; // the promise's resolve, just below
    this.firstContact = new Promise((resolve) => {
      this.contacted = resolve;
    });
  }

  /** Connect (or join the tab that leads); resolves true once the first state was read,
   * false if the first attempt failed (the app then shows the space without live updates
   * meanwhile). */
  start() {
    if (!this.shared) this.connect();
    else this.elect();
    return this.firstContact;
  }

  /** Lead when no tab of this sign-in does; else follow, queued to lead when it goes. */
  async elect() {
    this.channel = new BroadcastChannel(this.name);
    this.channel.onmessage = ({ data }) => this.heard(data);
    const leads = await navigator.locks.request(this.name, { ifAvailable: true }, (lock) => lock && this.hold());
    if (leads || this.stopped) return;
    this.post({ name: "hello" });
    this.enqueue({ resync: true }); // the leader's stream is running: read the state now
    navigator.locks.request(this.name, { signal: this.unqueue.signal }, () => this.hold()).catch(() => {}); // aborted: stopped
  }

  /** Hold the lock (until stop) and read the stream from the last cursor heard. */
  hold() {
    if (this.stopped) return false;
    this.leading = true;
    this.connect();
    return new Promise((resolve) => {
      this.unlock = resolve;
    });
  }

  /** A message from another tab of this sign-in. */
  /** @param {any} message */
  heard(message) {
    if (this.stopped) return;
    if (message.name === "signed-out") {
      this.app.signedOut(); // it stops this tab's share, and the stream if this tab reads it
      return;
    }
    if (message.name === "hello") {
      if (this.leading) this.post({ name: "welcome", cursor: this.cursor, state: this.state, detail: this.detail });
    } else if (this.leading) {
      return; // a tab that led before this one: its last words are already known
    } else if (message.name === "welcome") {
      if (this.cursor === null) this.cursor = message.cursor;
      if (message.state) this.shown(message.state, message.detail);
    } else if (message.name === "state") {
      this.shown(message.state, message.detail);
      if (message.state === "off" && refusesSignIn(message.detail)) {
        this.stop(message.detail);
        refusedOnStream(asError(message.detail)); // the key is this tab's too: it asks again
      }
    } else this.event(message.name, message.data);
  }

  /** This browser signed out of the local console (the console expired its cookie): tell
   * its other tabs, which stop at once and say so (the one that leads ends the stream), not
   * at their next request. Called after stop(), so on a channel of its own. */
  signedOut() {
    if (!window.BroadcastChannel) return;
    const channel = new BroadcastChannel(this.name);
    channel.postMessage({ name: "signed-out" });
    channel.close();
  }

  /** @param {any} message */
  post(message) {
    if (this.shared && this.channel) this.channel.postMessage(message);
  }

  /** Stop for good (signed out, or the page goes): the relay's watch ends with the request,
   * and another tab of this sign-in takes the stream over. */
  /** @param {Detail | null} detail */
  stop(detail = null) {
    // A refusal holds for every tab of this sign-in; a tab that goes only hands over.
    if (refusesSignIn(detail) && this.leading) this.post({ name: "state", state: "off", detail });
    this.shown("off", detail);
    this.stopped = true;
    clearTimeout(this.timer);
    this.controller?.abort();
    this.unqueue.abort();
    this.unlock?.();
    this.channel?.close();
  }

  async connect() {
    if (this.stopped) return;
    const generation = ++this.generation;
    const controller = (this.controller = new AbortController());
    /** @type {Record<string, string>} */
    const headers = this.cursor === null ? {} : { "last-event-id": this.cursor };
    this.show(this.failures ? "reconnecting" : "connecting");
    /** @type {Detail | null} */
    let ending = null;
    /** @type {Detail | null} the relay's last event, when it says why the watch failed */
    let told = null;
    try {
      await stream("/api/events", undefined, (name, data) => {
        if (generation !== this.generation) return;
        if (name === "error") ending = told = data;
        else {
          this.post({ name, data });
          this.event(name, data);
        }
      }, { method: "GET", headers, signal: controller.signal });
    } catch (error) {
      if (controller.signal.aborted) return;
      ending = refusal(error);
    }
    if (this.stopped || generation !== this.generation) return;
    this.after(ending || { code: "UNAVAILABLE", message: "the live stream ended", then: "resume" });
    // A refused key ends the watch as it refuses a call (whose answer already said so): the
    // page asks for a key again, though the user made no call.
    const said = /** @type {Detail | null} */ (told); // set in the callback, which tsc does not follow
    if (said?.then === "stop") refusedOnStream(asError(said));
  }

  /** An event of the stream, read here or relayed by the leader. */
  /**
   * @param {string} name
   * @param {any} data
   */
  event(name, data) {
    if (name === "ready") this.ready(data);
    else if (name === "change") this.change(data);
  }

  /** @param {{resumed: boolean, cursor: string | null}} data */
  ready(data) {
    this.failures = 0;
    this.readied = true;
    this.connected = true;
    if (data.resumed) {
      this.show("live");
      this.enqueue({ recover: true }); // what failed while the stream was down loads again
    } else {
      this.cursor = data.cursor;
      this.enqueue({ resync: true }); // "live" once the state is read
    }
  }

  /** @param {{cursor: string}} event */
  change(event) {
    this.cursor = event.cursor;
    this.enqueue(event);
  }

  /** The stream ended with `ending` ({code, message, then}): retry, restart or stop. */
  /** @param {Detail} ending */
  after(ending) {
    this.connected = false;
    if (!this.readied) this.contacted(false);
    if (ending.then === "stop") {
      this.stop(ending);
      return;
    }
    if (ending.then === "restart") this.cursor = null;
    this.retry(ending);
  }

  /** @param {Detail} detail */
  retry(detail) {
    const delay = RETRY_MS[Math.min(this.failures, RETRY_MS.length - 1)];
    this.failures += 1;
    this.show("reconnecting", detail);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => (this.leading ? this.connect() : this.enqueue({ resync: true })), delay);
  }

  /** Watch from now and reload the view: a change may have been missed. A tab that follows
   * only reads its state again, later (the leader's stream is not its to restart). */
  /** @param {Detail} detail */
  restart(detail) {
    this.queue = [];
    this.connected = false;
    if (!this.leading) {
      if (!this.stopped) this.retry(detail);
      return;
    }
    this.generation += 1;
    this.controller?.abort();
    this.cursor = null;
    if (!this.stopped) this.retry(detail);
  }

  /** @param {any} item */
  enqueue(item) {
    this.queue.push(item);
    if (!this.draining) this.drain();
  }

  /** Apply what arrived, in order, a batch at a time (a burst costs one refetch of each). */
  async drain() {
    this.draining = true;
    try {
      while (this.queue.length && !this.stopped) {
        let batch = this.queue.splice(0);
        const last = batch.map((item) => Boolean(item.resync)).lastIndexOf(true);
        if (last >= 0) {
          batch = batch.slice(last + 1);
          const loaded = await this.app.resync(); // it shows its own errors
          this.contacted(true);
          if (!loaded) {
            this.restart({ code: "UNAVAILABLE", message: "the space could not be read" });
            return;
          }
          if (this.connected) this.show("live");
        }
        if (batch.some((item) => item.recover)) await this.app.recover();
        batch = batch.filter((item) => !item.recover);
        if (batch.length) await this.app.apply(batch);
      }
    } catch (error) {
      this.app.reportError(error);
      const failure = /** @type {{code?: string, message?: string}} */ (error);
      this.restart({ code: failure.code || "UNAVAILABLE", message: failure.message || String(error) });
    } finally {
      this.draining = false;
    }
  }

  /** Show the stream's state here and, when this tab reads it, in the tabs that follow. */
  /**
   * @param {State} state
   * @param {Detail | null} detail
   */
  show(state, detail = null) {
    if (this.stopped) return;
    if (this.leading) this.post({ name: "state", state, detail });
    this.shown(state, detail);
  }

  /**
   * @param {State} state
   * @param {Detail | null} detail
   */
  shown(state, detail) {
    const was = this.state;
    this.state = state;
    this.detail = detail;
    if (!this.leading) {
      this.connected = state === "live";
      if (state === "live" && was !== "live" && was !== null) this.enqueue({ recover: true });
    }
    this.indicator.textContent = LABELS[state];
    this.indicator.title = detail ? `${detail.code}: ${detail.message}` : "";
    this.indicator.dataset.state = state;
    this.indicator.classList.toggle("live-on", state === "live");
  }
}

/** `detail` as the error it tells of. */
/** @param {Detail} detail */
function asError(detail) {
  return new ApiError(detail.code, detail.message, detail.reason ?? null);
}

/** Whether `detail` refuses this sign-in (a key revoked, a space it no longer reaches): it
 * holds for every tab of the sign-in. */
/** @param {Detail | null | undefined} detail */
function refusesSignIn(detail) {
  return Boolean(detail) && keyRefused(asError(/** @type {Detail} */ (detail)));
}

/** What a failed request to the relay means: a refusal stops, a bad cursor restarts. */
/**
 * @param {unknown} error
 * @returns {Detail}
 */
function refusal(error) {
  const code = error instanceof ApiError ? error.code : "UNAVAILABLE";
  const message = (error instanceof Error && error.message) || String(error);
  if (code === "UNAUTHENTICATED" || code === "403") return { code, message, then: "stop" };
  if (code === "INVALID_ARGUMENT") return { code, message, then: "restart" };
  return { code, message, then: "resume" };
}
