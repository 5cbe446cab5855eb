// Live updates: the page follows the space's changes through the console's relay of
// WatchSpace (/api/events). The stream is read with fetch, not EventSource, so a deployed
// console can send its key in a header. Events name ids, kinds and seqs only; the app
// refetches just what they name. The cursor of the last event received resumes the
// stream after a break (Last-Event-ID), so nothing is lost or applied twice; a stream
// that starts from now (the first, or after an expired cursor) reloads the view first.

import { ApiError, stream } from "./api.js";

const RETRY_MS = [250, 500, 1000, 2000, 5000, 10000];
const LABELS = {
  connecting: "live: connecting…",
  live: "live",
  reconnecting: "live: reconnecting…",
  off: "live updates: off",
};

export class Live {
  /**
   * `app` gives resync() (reload the forest and the open view; false when it failed),
   * apply(events) and reportError(error).
   */
  constructor(indicator, app) {
    this.indicator = indicator;
    this.app = app;
    this.cursor = null;
    this.queue = [];
    this.draining = false;
    this.stopped = false;
    this.failures = 0;
    this.generation = 0;
    this.readied = false;
    this.connected = false;
    this.controller = null;
    this.timer = null;
    this.contacted = null;
    this.firstContact = new Promise((resolve) => (this.contacted = resolve));
  }

  /** Connect; resolves true once the first state was read after `ready`, false if the
   * first attempt failed (the app then shows the space without live updates meanwhile). */
  start() {
    this.connect();
    return this.firstContact;
  }

  /** Stop for good (signed out, or the page goes): the relay's watch ends with the request. */
  stop(detail = null) {
    this.stopped = true;
    clearTimeout(this.timer);
    this.controller?.abort();
    this.show("off", detail);
  }

  async connect() {
    if (this.stopped) return;
    const generation = ++this.generation;
    const controller = (this.controller = new AbortController());
    const headers = this.cursor === null ? {} : { "last-event-id": this.cursor };
    this.show(this.failures ? "reconnecting" : "connecting");
    let ending = null;
    try {
      await stream("/api/events", undefined, (name, data) => {
        if (generation !== this.generation) return;
        if (name === "ready") this.ready(data);
        else if (name === "change") this.change(data);
        else if (name === "error") ending = data;
      }, { method: "GET", headers, signal: controller.signal });
    } catch (error) {
      if (controller.signal.aborted) return;
      ending = refusal(error);
    }
    if (this.stopped || generation !== this.generation) return;
    this.after(ending || { code: "UNAVAILABLE", message: "the live stream ended", then: "resume" });
  }

  ready(data) {
    this.failures = 0;
    this.readied = true;
    this.connected = true;
    if (data.resumed) this.show("live");
    else {
      this.cursor = data.cursor;
      this.enqueue({ resync: true }); // "live" once the state is read
    }
  }

  change(event) {
    this.cursor = event.cursor;
    this.enqueue(event);
  }

  /** The stream ended with `ending` ({code, message, then}): retry, restart or stop. */
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

  retry(detail) {
    const delay = RETRY_MS[Math.min(this.failures, RETRY_MS.length - 1)];
    this.failures += 1;
    this.show("reconnecting", detail);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  /** Watch from now and reload the view: a change may have been missed. */
  restart(detail) {
    this.queue = [];
    this.connected = false;
    this.generation += 1;
    this.controller?.abort();
    this.cursor = null;
    if (!this.stopped) this.retry(detail);
  }

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
        if (batch.length) await this.app.apply(batch);
      }
    } catch (error) {
      this.app.reportError(error);
      this.restart({ code: error.code || "UNAVAILABLE", message: error.message || String(error) });
    } finally {
      this.draining = false;
    }
  }

  show(state, detail = null) {
    this.indicator.textContent = LABELS[state];
    this.indicator.title = detail ? `${detail.code}: ${detail.message}` : "";
    this.indicator.dataset.state = state;
    this.indicator.classList.toggle("live-on", state === "live");
  }
}

/** What a failed request to the relay means: a refusal stops, a bad cursor restarts. */
function refusal(error) {
  const code = error instanceof ApiError ? error.code : "UNAVAILABLE";
  const message = error.message || String(error);
  if (code === "UNAUTHENTICATED" || code === "403") return { code, message, then: "stop" };
  if (code === "INVALID_ARGUMENT") return { code, message, then: "restart" };
  return { code, message, then: "resume" };
}
