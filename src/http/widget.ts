/**
 * The web channel's visitor side (CONTRACT §3): visitors are created for an application's
 * public id and then act with their visitor token — send messages, read their history, and
 * hold a WebSocket that receives every message of their conversations. Handlers parse,
 * authenticate and hand writes to the application's actor.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { Sql } from "../db/client.ts";
import { appActorKey, type AppCommand, type CommandResult } from "../actors/protocol.ts";
import { findApplicationByPublicId } from "../db/applications.ts";
import { findClientConversation, findLatestClientConversation } from "../db/conversations.ts";
import { listMessages } from "../db/messages.ts";
import { newVisitorToken, sha256Hex } from "../crypto/tokens.ts";
import { AppError } from "../domain/app_error.ts";
import { parseMessageContent } from "../domain/message_kinds.ts";
import { ok } from "./envelope.ts";
import { readBody, readJson } from "./body.ts";
import { methodNotAllowed } from "./method_not_allowed.ts";
import { rateLimit } from "./middleware/rate_limit.ts";
import { cors } from "./middleware/cors.ts";
import { bodySizeLimit } from "./middleware/body_size_limit.ts";
import { clientIp } from "./client_ip.ts";
import { HISTORY_QUERY, safeId } from "./query_params.ts";
import type { HitCounter } from "../rate_limit/hit_counter.ts";
import { createBucketNames } from "../rate_limit/bucket_names.ts";
import { createVisitorAuth, visitorTokenOf } from "./visitor_auth.ts";
import { type AttachVisitor, widgetSocketHandler } from "./widget_socket.ts";
import { refuseWhileShuttingDown, type ShuttingDown } from "./middleware/shutting_down.ts";
import { requestDeadline } from "./middleware/request_deadline.ts";

/** What the widget routes need. */
export interface WidgetDeps {
  sql: Sql;
  /** Marks the requests that arrived once the stop began: refused after CORS and rate limit. */
  shuttingDown?: ShuttingDown;
  /** How long a request may go unanswered (see `request_deadline.ts`). @default REQUEST_DEADLINE_MS */
  requestDeadlineMs?: number;
  ask(key: string, command: AppCommand): Promise<CommandResult>;
  attachVisitor: AttachVisitor;
  /** Where widget requests are counted. */
  hitCounter: HitCounter;
  /** Requests per minute per visitor token (and per IP for visitor creation). */
  widgetRateLimit: number;
  /** Whether `X-Forwarded-For` names the client. */
  trustProxy: boolean;
}

/** What a visitor may send: text and attachments; buttons, cards and forms come from the business. */
const VISITOR_MESSAGE_TYPES = ["text", "image", "file"] as const;

const newVisitorSchema = z.strictObject({
  name: z.string().trim().min(1).max(200).refine((name) => !name.includes("\0"), {
    message: "must not contain NUL characters",
  }).optional(),
  email: z.email().max(320).optional(),
});

/** Whether `value` (a body's field, of any type) is a message type a visitor may send. */
function isVisitorMessageType(value: unknown): value is typeof VISITOR_MESSAGE_TYPES[number] {
  return (VISITOR_MESSAGE_TYPES as readonly unknown[]).includes(value);
}

/** What an application's public id may look like (they are made as `app_` and 24 hex digits). */
const PUBLIC_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** How a body names a field that is no id. */
const NOT_AN_ID = { error: "must be a positive integer" };
/** An id a body may name: up to the largest a JS number keeps exact (PostgreSQL bigint). */
const ID = z.number(NOT_AN_ID).int(NOT_AN_ID).positive(NOT_AN_ID)
  .max(Number.MAX_SAFE_INTEGER, NOT_AN_ID);

/** How a body names an action id that no button can have. */
const NOT_A_BUTTON_ID = { error: "must be a string of 1 to 256 characters" };

/** A click's ids are judged by their JSON text: `0.99999999999999999` is not message 1. */
const ACTION_ID_FIELDS = new Set(["chat_id", "message_id"]);

const actionSchema = z.object({
  chat_id: ID,
  message_id: ID,
  // PostgreSQL text cannot hold NUL, and no button id has one.
  action_id: z.string(NOT_A_BUTTON_ID).min(1, NOT_A_BUTTON_ID).max(256, NOT_A_BUTTON_ID)
    .refine((id) => !id.includes("\0"), { message: "must not contain NUL characters" }),
});

/** Routes under `/api/v1/widget`. */
export function widgetRoutes(deps: WidgetDeps): Hono {
  const auth = createVisitorAuth(deps.sql);

  async function command(command: AppCommand): Promise<unknown> {
    const result = await deps.ask(appActorKey(command.appId), command);
    if (!result.ok) throw new AppError(result.status, result.message);
    return result.value;
  }

  const routes = new Hono();

  // The widget runs on the business's pages: any origin may call (tokens, never cookies).
  routes.use(cors({
    allowMethods: ["GET", "POST"],
    allowHeaders: ["Authorization", "Content-Type", "X-Request-Id"],
    exposeHeaders: [
      "X-Request-Id",
      "Retry-After",
      "X-RateLimit-Limit",
      "X-RateLimit-Remaining",
      "X-RateLimit-Reset",
      "RateLimit-Policy",
      "RateLimit",
    ],
    maxAgeSeconds: 86_400,
  }));

  const bucketOfToken = createBucketNames({ prefix: "widget:" });

  // Per visitor token — the one the route authenticates with, so that another token sent along
  // buys no fresh bucket; visitor creation, which takes no token, per client IP whatever it sends.
  routes.use(rateLimit({
    counter: deps.hitCounter,
    limit: deps.widgetRateLimit,
    bucketOf(c) {
      const token = c.req.path.endsWith("/visitors") ? undefined : visitorTokenOf(c);
      return token ? bucketOfToken(token) : `widget-ip:${clientIp(c, deps.trustProxy)}`;
    },
  }));
  routes.use(refuseWhileShuttingDown(deps.shuttingDown));
  // After CORS and the rate limit, whose headers its answer carries too.
  routes.use(requestDeadline(deps.requestDeadlineMs));

  routes.use(bodySizeLimit());

  routes.post("/:publicId/visitors", async (c) => {
    const body = await readJson(c, { optional: true });
    // Only a blank body stands for `{}`: JSON's null is no object either.
    const parsed = newVisitorSchema.safeParse(body === undefined ? {} : body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new AppError(400, `Invalid visitor: ${[...issue.path, issue.message].join(" ")}`);
    }
    const publicId = c.req.param("publicId");
    // Only the shape public ids have reaches the database (a NUL, say, is no text to it).
    const app = PUBLIC_ID.test(publicId)
      ? await findApplicationByPublicId(deps.sql, publicId)
      : null;
    if (!app) throw new AppError(404, "Application not found");
    const token = newVisitorToken(app.id);
    const created = await command({
      kind: "visitor.create",
      appId: app.id,
      tokenHash: sha256Hex(token),
      name: parsed.data.name ?? null,
      email: parsed.data.email ?? null,
    }) as { client_id: number };
    return ok(c, { visitor_token: token, client_id: created.client_id });
  });

  routes.post("/messages", async (c) => {
    const visitor = await auth.authenticate(visitorTokenOf(c));
    const body = await readBody(c, ["json"]);
    const { content, message_type: messageType = "text" } = body;
    if (typeof content !== "string" || content.trim() === "") {
      throw new AppError(400, "content is required");
    }
    if (!isVisitorMessageType(messageType)) {
      throw new AppError(400, `message_type must be one of: ${VISITOR_MESSAGE_TYPES.join(", ")}`);
    }
    const { payload } = parseMessageContent(messageType, content);
    const sent = await command({
      kind: "visitor.message",
      appId: visitor.appId,
      clientId: visitor.clientId,
      messageType,
      content,
      payload,
    });
    return ok(c, sent);
  });

  routes.post("/actions", async (c) => {
    const visitor = await auth.authenticate(visitorTokenOf(c));
    const parsed = actionSchema.safeParse(
      await readBody(c, ["json"], { integerKeys: ACTION_ID_FIELDS }),
    );
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new AppError(400, `Invalid action: ${issue.path.join(".")} ${issue.message}`);
    }
    const clicked = await command({
      kind: "visitor.action",
      appId: visitor.appId,
      clientId: visitor.clientId,
      chatId: parsed.data.chat_id,
      messageId: parsed.data.message_id,
      actionId: parsed.data.action_id,
    });
    return ok(c, clicked);
  });

  routes.get("/messages", async (c) => {
    const visitor = await auth.authenticate(visitorTokenOf(c));
    const chatParam = c.req.query("chat_id");
    // Digits as the Open API reads an id (leading zeros allowed); beyond ours, none of ours.
    const chatId = chatParam !== undefined && /^[0-9]+$/.test(chatParam) ? safeId(chatParam) : null;
    const chat = chatParam === undefined
      ? await findLatestClientConversation(deps.sql, visitor.appId, visitor.clientId)
      : chatId
      ? await findClientConversation(deps.sql, visitor.appId, visitor.clientId, chatId)
      : null;
    if (!chat) {
      if (chatParam === undefined) return ok(c, []);
      throw new AppError(404, "Conversation not found");
    }
    const { limit, before } = HISTORY_QUERY.parse(c.req.query());
    const messages = await listMessages(deps.sql, visitor.appId, chat.id, {
      limit,
      before,
      includeInternal: false,
    });
    return ok(c, messages);
  });

  routes.get("/socket", widgetSocketHandler(auth, deps.attachVisitor));

  methodNotAllowed(routes, ["/:publicId/visitors", "/messages", "/actions", "/socket"]);
  return routes;
}
