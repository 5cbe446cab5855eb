#!/usr/bin/env node
// A Node.js client of the Stello AgentGateway, with stubs loaded at run time from
// ../../protos by @grpc/proto-loader (no code generation step).
//
// It watches the space (WatchSpace, from the present) while it creates a
// root session, streams one turn on it, forks the root with context INHERIT,
// streams one turn on the fork and lists the space's digests; then it prints
// the events it saw (once the fork's turn arrived) and the tree under the root. Every output line starts with a fixed word so
// a test (tests/clients/test_node_client.py) can check it; text from the model
// is JSON-encoded so that it stays on one line.
//
// Environment:
//   STELLO_GATEWAY    host:port of the gateway (`stello up` prints it)
//   STELLO_KEY        the API key, sent as `authorization: Bearer <key>`
//   STELLO_SPACE_ID   the space every request names
//   STELLO_MESSAGE    optional: the first user message (default below)
//   STELLO_DEADLINE_S optional: deadline of each call in seconds (default 30)
//
// Exit codes: 0 done, 1 a gRPC call failed, 2 bad configuration.

import { randomUUID } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PROTOS = path.resolve(HERE, "..", "..", "protos");

/**
 * @typedef {object} Config
 * @property {string} gateway   host:port of the gateway
 * @property {string} key       the API key
 * @property {string} spaceId   the space id sent in every request
 * @property {string} message   the first user message
 * @property {number} deadlineS per-call deadline in seconds
 */

/** A failed gRPC call, with the RPC that failed. */
class CallError extends Error {
  /**
   * @param {string} rpc the RPC name
   * @param {grpc.ServiceError} cause the gRPC error
   */
  constructor(rpc, cause) {
    const code = grpc.status[cause.code] ?? String(cause.code);
    super(`${rpc} failed: ${code}: ${cause.details || cause.message}`);
    this.rpc = rpc;
    this.code = code;
    this.cause = cause;
  }
}

/**
 * Read the configuration from the environment; exit 2 when something is missing.
 * @returns {Config}
 */
function readConfig() {
  const missing = ["STELLO_GATEWAY", "STELLO_KEY", "STELLO_SPACE_ID"].filter(
    (name) => !process.env[name],
  );
  if (missing.length > 0) {
    console.error(`error: set ${missing.join(", ")} (\`stello up\` prints the values)`);
    process.exit(2);
  }
  const deadlineS = Number(process.env.STELLO_DEADLINE_S ?? "30");
  if (!Number.isFinite(deadlineS) || deadlineS <= 0) {
    console.error("error: STELLO_DEADLINE_S must be a positive number of seconds");
    process.exit(2);
  }
  return {
    gateway: /** @type {string} */ (process.env.STELLO_GATEWAY),
    key: /** @type {string} */ (process.env.STELLO_KEY),
    spaceId: /** @type {string} */ (process.env.STELLO_SPACE_ID),
    message: process.env.STELLO_MESSAGE || "Hello from Node.js",
    deadlineS,
  };
}

/**
 * Load stello.agent.v1.AgentGateway from the protos and open a plaintext client.
 * The google/protobuf imports resolve to the copies that proto-loader ships.
 * @param {Config} config
 * @returns {any} the AgentGateway client (its methods are built at run time)
 */
function openGateway(config) {
  const definition = protoLoader.loadSync("stello/agent/v1/agent.proto", {
    includeDirs: [PROTOS],
    keepCase: true, // field names exactly as in the protos: space_id, text_delta, ...
    longs: String, // int64 (record seq) as decimal strings
    enums: String, // enum values by name: FORK_CONTEXT_INHERIT, ...
    defaults: true,
    oneofs: true, // SendStreamResponse.event names the field that is set
  });
  const loaded = /** @type {any} */ (grpc.loadPackageDefinition(definition));
  const AgentGateway = loaded.stello.agent.v1.AgentGateway;
  return new AgentGateway(config.gateway, grpc.credentials.createInsecure());
}

/**
 * Call options: the key in the metadata and a deadline.
 * @param {Config} config
 * @returns {{metadata: grpc.Metadata, options: grpc.CallOptions}}
 */
function callOptions(config) {
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${config.key}`);
  return { metadata, options: { deadline: Date.now() + config.deadlineS * 1000 } };
}

/**
 * Make a unary call and return its response.
 * @param {any} client
 * @param {Config} config
 * @param {string} rpc the method name, e.g. "CreateRoot"
 * @param {object} request
 * @returns {Promise<any>}
 */
function unary(client, config, rpc, request) {
  const { metadata, options } = callOptions(config);
  return new Promise((resolve, reject) => {
    client[rpc](request, metadata, options, (/** @type {any} */ err, /** @type {any} */ reply) =>
      err ? reject(new CallError(rpc, err)) : resolve(reply),
    );
  });
}

/**
 * Run one turn with SendStream, printing each text delta as it arrives.
 * @param {any} client
 * @param {Config} config
 * @param {string} sessionId
 * @param {string} content the user message
 * @returns {Promise<any>} the SendResponse of the final `done` event
 */
async function sendStream(client, config, sessionId, content) {
  const { metadata, options } = callOptions(config);
  console.log(`send: ${sessionId} ${JSON.stringify(content)}`);
  const call = client.SendStream(
    { space_id: config.spaceId, session_id: sessionId, content, request_id: randomUUID() },
    metadata,
    options,
  );
  let done = null;
  try {
    for await (const event of call) {
      if (event.event === "text_delta") {
        console.log(`delta: ${JSON.stringify(event.text_delta.text)}`);
      } else if (event.event === "tool_call") {
        console.log(`tool_call: ${event.tool_call.name} ${event.tool_call.arguments_json}`);
      } else if (event.event === "done") {
        done = event.done;
      }
    }
  } catch (err) {
    throw new CallError("SendStream", /** @type {grpc.ServiceError} */ (err));
  }
  if (done === null) {
    throw new Error("SendStream ended without a done event");
  }
  console.log(`reply: ${sessionId} ${JSON.stringify(done.assistant.content)}`);
  console.log(`stored: ${sessionId} ${done.records.map((/** @type {any} */ r) => r.seq).join(",")}`);
  return done;
}

/**
 * Watch the space from the present (`after_cursor` unset) in the background.
 * `ready` resolves once the server fixed the start (the `stello-watch-cursor`
 * initial metadata): every change committed after it is streamed, so the caller
 * makes its changes only then. Starting from the space's first event instead
 * (`after_cursor: "0"`) fails FAILED_PRECONDITION CURSOR_EXPIRED once that
 * event is past the retention (STELLO_STORAGE_EVENT_RETENTION_S, 24 h); so does
 * a saved cursor that old, after which a client re-reads the state and watches
 * from the present again.
 * `until(kind, sessionId)` resolves once such an event arrived (or rejects after
 * the deadline); `stop()` cancels the stream and answers every event seen.
 * @param {any} client
 * @param {Config} config
 */
function watchSpace(client, config) {
  const { metadata } = callOptions(config);
  const call = client.WatchSpace({ space_id: config.spaceId }, metadata);
  /** @type {(cursor: string) => void} */
  let started = () => {};
  /** @type {(err: Error) => void} */
  let failed = () => {};
  /** @type {Promise<string>} the cursor the stream starts after */
  const ready = new Promise((resolve, reject) => {
    started = resolve;
    failed = reject;
  });
  const timer = setTimeout(
    () => failed(new Error("WatchSpace did not start in time")),
    config.deadlineS * 1000,
  );
  ready.then(
    () => clearTimeout(timer),
    () => clearTimeout(timer),
  );
  call.on("metadata", (/** @type {grpc.Metadata} */ initial) => {
    // A call refused at once (a bad key) may send empty headers: its status follows.
    const [cursor] = initial.get("stello-watch-cursor");
    if (cursor !== undefined) started(String(cursor));
  });
  /** @type {any[]} */
  const events = [];
  /** @type {Array<() => void>} */
  const waiters = [];
  /** @type {Error | null} */
  let failure = null;
  const done = (async () => {
    try {
      for await (const message of call) {
        events.push(message.event);
        waiters.splice(0).forEach((wake) => wake());
      }
    } catch (err) {
      if (/** @type {any} */ (err).code !== grpc.status.CANCELLED) {
        failure = new CallError("WatchSpace", /** @type {grpc.ServiceError} */ (err));
        failed(failure);
        waiters.splice(0).forEach((wake) => wake());
      }
    }
    failed(new Error("WatchSpace ended before it started"));
  })();
  /**
   * @param {string} kind
   * @param {string} sessionId
   */
  async function until(kind, sessionId) {
    const deadline = Date.now() + config.deadlineS * 1000;
    const seen = () => events.some((e) => e.kind === kind && e.session_id === sessionId);
    while (!seen()) {
      if (failure) throw failure;
      if (Date.now() > deadline) throw new Error(`no ${kind} event of ${sessionId} in time`);
      await new Promise((resolve) => {
        waiters.push(() => resolve(undefined));
        setTimeout(resolve, 200);
      });
    }
  }
  async function stop() {
    call.cancel();
    await done;
    return events;
  }
  return { ready, until, stop };
}

/**
 * Every digest of the space, following next_page_token.
 * @param {any} client
 * @param {Config} config
 * @returns {Promise<any[]>}
 */
async function listDigests(client, config) {
  const digests = [];
  let pageToken = "";
  do {
    const page = await unary(client, config, "ListSessionDigests", {
      space_id: config.spaceId,
      page_size: 100,
      page_token: pageToken,
    });
    digests.push(...page.digests);
    pageToken = page.next_page_token;
  } while (pageToken);
  return digests;
}

/**
 * Print GetTree's pre-order nodes, two spaces of indent per level below the root.
 * @param {any[]} nodes
 */
function printTree(nodes) {
  /** @type {Map<string, number>} */
  const level = new Map();
  console.log("tree:");
  for (const node of nodes) {
    const parentLevel = node.parent_id ? level.get(node.parent_id) : undefined;
    const depth = parentLevel === undefined ? 0 : parentLevel + 1;
    level.set(node.id, depth);
    const indent = "  ".repeat(depth + 1);
    console.log(`${indent}${node.label} [${node.id}] turns=${node.turn_count}`);
  }
}

/**
 * The whole walk: root, turn, fork, turn, digests, tree.
 * @param {Config} config
 */
async function main(config) {
  const client = openGateway(config);
  const watch = watchSpace(client, config);
  try {
    await watch.ready;
    const root = (
      await unary(client, config, "CreateRoot", {
        space_id: config.spaceId,
        label: "node-root",
        request_id: randomUUID(),
      })
    ).session;
    console.log(`root: ${root.id} ${root.label}`);
    await sendStream(client, config, root.id, config.message);

    const fork = (
      await unary(client, config, "Fork", {
        space_id: config.spaceId,
        source_session_id: root.id,
        label: "node-fork",
        context: "FORK_CONTEXT_INHERIT",
        request_id: randomUUID(),
      })
    ).session;
    console.log(`fork: ${fork.id} ${fork.label}`);
    await sendStream(client, config, fork.id, "And now from the fork");

    for (const digest of await listDigests(client, config)) {
      const parent = digest.parent_id || "-";
      console.log(`digest: ${digest.id} parent=${parent} turns=${digest.turn_count} ${digest.label}`);
    }

    await watch.until("EVENT_KIND_TURN_COMMITTED", fork.id);
    for (const event of await watch.stop()) {
      console.log(`event: ${event.cursor} ${event.kind} ${event.session_id}`);
    }

    const tree = await unary(client, config, "GetTree", { space_id: config.spaceId, root_id: root.id });
    printTree(tree.nodes);
  } finally {
    await watch.stop();
    client.close();
  }
}

main(readConfig()).catch((err) => {
  if (err instanceof CallError) {
    console.error(`error: ${err.message}`);
  } else {
    console.error(`error: ${err instanceof Error ? err.stack : String(err)}`);
  }
  process.exit(1);
});
