/**
 * Flows (CONTRACT §4.1): an application's scripted conversation, a graph of nodes that each send
 * one message and then wait for a click on one of its buttons, move on by themselves (`then`),
 * hand the conversation to a human (`handoff`) or close it (`close`). This module validates a
 * Flow document into its stored form and computes, without I/O, which messages a start or a
 * click sends and where the Flow stops; the write path stores them.
 */
import { z } from "zod";
import { AppError } from "./app_error.ts";
import { isMessageType, MESSAGE_TYPES, type MessageType } from "./message_kinds.ts";
import type { Button } from "./rich_content.ts";
import { buttonsOffered, describeIssue, parseMessageContent } from "./message_kinds.ts";

/** The targets that are not nodes: stop the Flow for humans, or close the conversation. */
export const FLOW_EXITS = ["handoff", "close"] as const;

/** Most nodes in one Flow. */
export const MAX_FLOW_NODES = 200;

/** What a node name looks like: letters, digits, `_` and `-`, 1 to 64 characters. */
const NODE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

const nodeName = z.string().regex(NODE_NAME, "must be 1 to 64 letters, digits, _ or -");

/** A node's message as written in a Flow: rich `content` is a JSON document, not a string. */
const FLOW_MESSAGE = z.object({
  message_type: z.enum(MESSAGE_TYPES),
  content: z.union([z.string(), z.record(z.string(), z.unknown())]),
});

const FLOW_NODE = z.object({
  message: FLOW_MESSAGE,
  on: z.record(z.string(), z.string()).optional(),
  then: z.string().optional(),
});

/**
 * A Flow document: `start` names the first node; each node has a `message` and at most one of
 * `on` (button id → target) and `then` (a target reached without waiting). A target is a node
 * name, `handoff` or `close`.
 */
export const FLOW_DOCUMENT = z.object({
  start: nodeName,
  nodes: z.record(nodeName, FLOW_NODE),
}).meta({ id: "Flow" });

/** A node's message in its stored form: `content` as sent, `payload` the parsed document. */
export interface FlowMessage {
  message_type: MessageType;
  content: string | Record<string, unknown>;
}

/** One node of a stored Flow. */
export interface FlowNode {
  message: FlowMessage;
  on?: Record<string, string>;
  then?: string;
}

/** A validated Flow, as stored and returned by `GET /flow`. */
export interface Flow {
  start: string;
  nodes: Record<string, FlowNode>;
}

function invalid(detail: string): AppError {
  return new AppError(400, `Invalid flow: ${detail}`);
}

function isTarget(flow: Flow, target: string): boolean {
  return (FLOW_EXITS as readonly string[]).includes(target) || Object.hasOwn(flow.nodes, target);
}

/** A node's message validated as a message would be, normalized (unknown keys dropped). */
function parseNodeMessage(name: string, message: FlowMessage): FlowMessage {
  const type = message.message_type;
  const plain = type === "text" || type === "markdown";
  if (plain !== (typeof message.content === "string")) {
    throw invalid(
      `nodes.${name}.message.content must be ${
        plain ? "a string" : "a JSON object"
      } for message_type ${type}`,
    );
  }
  const content = typeof message.content === "string"
    ? message.content
    : JSON.stringify(message.content);
  if (plain && content.trim() === "") throw invalid(`nodes.${name}.message.content is required`);
  try {
    const { payload } = parseMessageContent(type, content);
    return { message_type: type, content: plain ? content : payload as Record<string, unknown> };
  } catch (error) {
    if (error instanceof AppError) throw invalid(`nodes.${name}.message: ${error.message}`);
    throw error;
  }
}

/** The one key a Flow cannot use for a node or a button it maps: objects keep it as their prototype. */
const RESERVED_KEY = "__proto__";

/**
 * Validates a Flow document (CONTRACT §4.1) and returns its stored form: every node's message
 * passes the same checks as a sent message; `start` and every target name a node or an exit;
 * `on` names only buttons its message offers; no node has both `on` and `then`; `then` never
 * loops back without a click. A button `on` leaves out is allowed: a click on it stops the Flow,
 * as `handoff` does.
 *
 * @throws {AppError} 400 `Invalid flow: <detail>`, the detail naming the offending path.
 */
export function parseFlow(input: unknown): Flow {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw invalid("a Flow is a JSON object");
  }
  // A JSON object may hold a "__proto__" key, which no plain object can carry as a node name.
  const rawNodes = (input as { nodes?: unknown }).nodes;
  if (typeof rawNodes === "object" && rawNodes !== null) {
    if (Object.hasOwn(rawNodes, RESERVED_KEY)) {
      throw invalid(`nodes.${RESERVED_KEY} is a reserved name`);
    }
    // Nor as a key of `on`, which parsing would drop unseen.
    for (const [name, node] of Object.entries(rawNodes)) {
      const on = (node as { on?: unknown } | null)?.on;
      if (typeof on === "object" && on !== null && Object.hasOwn(on, RESERVED_KEY)) {
        throw invalid(`nodes.${name}: button id "${RESERVED_KEY}" is reserved in a Flow`);
      }
    }
  }
  const parsed = FLOW_DOCUMENT.safeParse(input, { error: describeIssue });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue.path.map(String).join(".");
    // A bad node name fails as a key of the record: its own rule says what is wrong.
    if (issue.code === "invalid_key") {
      throw invalid(`${path}: a node name ${issue.issues[0]?.message ?? "is not valid"}`);
    }
    throw invalid(path === "" ? issue.message : `${path} ${issue.message}`);
  }
  const names = Object.keys(parsed.data.nodes);
  if (names.length === 0) throw invalid("nodes must have at least one node");
  if (names.length > MAX_FLOW_NODES) {
    throw invalid(`nodes must have at most ${MAX_FLOW_NODES} nodes`);
  }
  const flow: Flow = { start: parsed.data.start, nodes: {} };
  for (const name of names) {
    if ((FLOW_EXITS as readonly string[]).includes(name)) {
      throw invalid(`nodes.${name} is a reserved name`);
    }
    const node = parsed.data.nodes[name];
    flow.nodes[name] = {
      message: parseNodeMessage(name, node.message),
      ...(node.on === undefined ? {} : { on: node.on }),
      ...(node.then === undefined ? {} : { then: node.then }),
    };
  }
  if (!Object.hasOwn(flow.nodes, flow.start)) throw invalid(`start: unknown node "${flow.start}"`);
  for (const name of names) checkNode(flow, name);
  checkThenLoops(flow);
  return flow;
}

function checkNode(flow: Flow, name: string): void {
  const node = flow.nodes[name];
  if (node.on !== undefined && node.then !== undefined) {
    throw invalid(`nodes.${name} has both "on" and "then"`);
  }
  const offered = buttonsOfNode(node).map((button) => button.id);
  if (offered.includes(RESERVED_KEY)) {
    throw invalid(`nodes.${name}: button id "${RESERVED_KEY}" is reserved in a Flow`);
  }
  if (node.on !== undefined) {
    if (offered.length === 0) throw invalid(`nodes.${name}.on: the message offers no buttons`);
    for (const [buttonId, target] of Object.entries(node.on)) {
      if (!offered.includes(buttonId)) {
        throw invalid(`nodes.${name}.on.${buttonId}: not a button of the message`);
      }
      if (!isTarget(flow, target)) {
        throw invalid(`nodes.${name}.on.${buttonId}: unknown node "${target}"`);
      }
    }
  }
  if (node.then !== undefined && !isTarget(flow, node.then)) {
    throw invalid(`nodes.${name}.then: unknown node "${node.then}"`);
  }
}

function checkThenLoops(flow: Flow): void {
  const safe = new Set<string>();
  for (const first of Object.keys(flow.nodes)) {
    const path: string[] = [];
    let current: string | undefined = first;
    while (current !== undefined && Object.hasOwn(flow.nodes, current) && !safe.has(current)) {
      if (path.includes(current)) {
        throw invalid(`nodes.${path.at(-1)}.then: loops back to "${current}" without a click`);
      }
      path.push(current);
      current = flow.nodes[current].then;
    }
    path.forEach((name) => safe.add(name));
  }
}

/** The buttons a node's message offers. */
function buttonsOfNode(node: FlowNode): Button[] {
  return buttonsOffered(node.message.message_type, node.message.content);
}

/** A message a Flow sends, ready to store: `content` as a string, `payload` for rich kinds. */
export interface FlowSend {
  /** The node that sends it; kept with the conversation while its buttons wait for a click. */
  node: string;
  messageType: MessageType;
  content: string;
  payload: Record<string, unknown> | null;
}

/** What a Flow does for one start or click: messages in order, then where it stops. */
export interface FlowStep {
  sends: FlowSend[];
  /**
   * `waiting`: the last message's buttons wait for a click; `handoff`: humans take over;
   * `close`: the conversation is to be closed; `end`: a node without `on` or `then` was reached.
   */
  stop: "waiting" | "handoff" | "close" | "end";
}

/** The step a Flow takes when a conversation starts. */
export function startFlow(flow: Flow): FlowStep {
  return walk(flow, flow.start);
}

/**
 * The step a Flow takes on a click of `buttonId` on the message of node `node`: null, and the
 * Flow stops, when the node's message offers the button but `on` leaves it out, or the node is
 * gone. When the node's message no longer offers it (the Flow was replaced since the message was
 * sent), the node is shown again as the Flow has it now, rather than leaving the visitor with
 * nothing to click.
 */
export function advanceFlow(flow: Flow, node: string, buttonId: string): FlowStep | null {
  if (!Object.hasOwn(flow.nodes, node)) return null;
  const { on } = flow.nodes[node];
  if (on !== undefined && Object.hasOwn(on, buttonId)) return walk(flow, on[buttonId]);
  const offered = buttonsOfNode(flow.nodes[node]).some((button) => button.id === buttonId);
  return offered ? null : walk(flow, node);
}

function walk(flow: Flow, target: string): FlowStep {
  const sends: FlowSend[] = [];
  // A validated Flow has no `then` loop; the bound keeps a hand-edited stored one finite.
  for (let hops = 0; hops <= MAX_FLOW_NODES; hops++) {
    if (target === "handoff" || target === "close") return { sends, stop: target };
    if (!Object.hasOwn(flow.nodes, target)) return { sends, stop: "end" };
    const node = flow.nodes[target];
    const { message_type: messageType, content } = node.message;
    if (!isMessageType(messageType)) return { sends, stop: "end" };
    sends.push({
      node: target,
      messageType,
      content: typeof content === "string" ? content : JSON.stringify(content),
      payload: typeof content === "string" ? null : content,
    });
    if (node.on !== undefined) return { sends, stop: "waiting" };
    if (node.then === undefined) return { sends, stop: "end" };
    target = node.then;
  }
  return { sends, stop: "end" };
}
