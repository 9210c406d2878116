/**
 * `POST /messages` of the Open API (SPEC §4.1, CONTRACT §2.5): a message into an existing
 * conversation of the caller's application, spoken by the application's bot. It takes the same
 * path as every write — validated here, then committed by the application's actor, which also
 * checks that the conversation is the caller's — and is answered only after commit.
 */
import { Hono } from "hono";
import { z } from "zod";
import { appActorKey, type AppCommand, type CommandResult } from "../../actors/protocol.ts";
import { AppError } from "../../domain/app_error.ts";
import { MESSAGE_TYPES, parseMessageContent } from "../../domain/message_kinds.ts";
import { MAX_CONTENT_LENGTH } from "../../domain/conversation.ts";
import {
  IDEMPOTENCY_KEY_HOURS,
  IDEMPOTENCY_KEY_PATTERN,
  parseIdempotencyKey,
  requestIdentity,
} from "../../domain/idempotency_key.ts";
import { sha256Hex } from "../../crypto/tokens.ts";
import { readBody } from "../body.ts";
import { ok } from "../envelope.ts";
import type { ApiKeyAuthVariables } from "../middleware/api_key_auth.ts";
import type { RouteDoc } from "./schemas.ts";

/** What the message route needs. */
export interface MessageRoutesDeps {
  ask(key: string, command: AppCommand): Promise<CommandResult>;
}

const SEND_MESSAGE_BODY = z.object({
  chat_id: z.union([
    // Any positive integer, even one beyond 2^53 (it names no conversation: 404, not 400).
    z.number().positive().refine(Number.isInteger).meta({ type: "integer" }),
    z.string().regex(/^[0-9]*[1-9][0-9]*$/),
  ]).meta({
    description: "The conversation (a JSON integer or a string of digits)",
  }),
  content: z.string().regex(/\S/).max(MAX_CONTENT_LENGTH).meta({
    description: "Not blank after trim. For rich message types, a JSON document as a string",
  }),
  message_type: z.enum(MESSAGE_TYPES).default("text"),
});

const REQUIRED = "chat_id and content are required";

/** A JSON `chat_id` is judged by its text: `0.99999999999999999` names no conversation 1. */
const ID_FIELDS = new Set(["chat_id"]);

/** How this route appears in the OpenAPI document. */
export const MESSAGE_ROUTE_DOCS: RouteDoc[] = [{
  method: "post",
  path: "/messages",
  summary: "Send a message into a conversation as the application's bot",
  body: {
    schema: SEND_MESSAGE_BODY,
    mediaTypes: ["application/json", "application/x-www-form-urlencoded"],
  },
  headerParams: z.object({
    "Idempotency-Key": z.string().regex(IDEMPOTENCY_KEY_PATTERN).meta({
      description: "Optional, 1 to 255 printable ASCII characters (a UUID, say). A request that " +
        `brings back a key used within ${IDEMPOTENCY_KEY_HOURS} hours is answered with the ` +
        "message the key's first request stored (and `Idempotent-Replayed: true`) instead of storing another; 422 if it " +
        "asks something else.",
    }).optional(),
  }),
  data: z.strictObject({ message_id: z.int().positive() }),
  headers: { "Idempotent-Replayed": "`true` when the answer is an earlier request's (same key)" },
  errors: [400, 404, 409, 413, 415, 422],
}];

/** Routes under `/openapi/v1/messages`. */
export function messageRoutes(deps: MessageRoutesDeps): Hono<{ Variables: ApiKeyAuthVariables }> {
  const routes = new Hono<{ Variables: ApiKeyAuthVariables }>();

  routes.post("/", async (c) => {
    const { appId } = c.get("caller");
    const key = parseIdempotencyKey(c.req.header("Idempotency-Key"));
    const body = await readBody(c, ["json", "form"], { integerKeys: ID_FIELDS });
    const parsed = SEND_MESSAGE_BODY.safeParse(body);
    // Presence first (one message for both fields); what is left — an unknown type, content
    // too long or not a valid document — parseMessageContent reports in the contract's order.
    if (
      !parsed.success &&
      parsed.error.issues.some((issue) =>
        issue.path[0] === "chat_id" || (issue.path[0] === "content" && issue.code !== "too_big")
      )
    ) {
      throw new AppError(400, REQUIRED);
    }
    const content = body.content as string;
    // Anything but a string (an array, an object) is no type's name.
    const requestedType = body.message_type === undefined ? "text" : body.message_type;
    const { messageType, payload } = parseMessageContent(
      typeof requestedType === "string" ? requestedType : "",
      content,
    );
    // A positive integer beyond the ids Parley hands out names no conversation of anyone's.
    const chatId = Number(body.chat_id);
    if (!Number.isSafeInteger(chatId)) throw new AppError(404, "Conversation not found");
    const result = await send({
      kind: "chat.reply",
      appId,
      chatId,
      senderType: "bot",
      senderName: null,
      messageType,
      content,
      payload,
      ...(key === null ? {} : {
        idempotency: { key, fingerprint: sha256Hex(requestIdentity(chatId, messageType, content)) },
      }),
    });
    if (result.replayed) c.header("Idempotent-Replayed", "true");
    return ok(c, result.value);
  });

  async function send(command: AppCommand): Promise<CommandResult & { ok: true }> {
    let result: CommandResult;
    try {
      result = await deps.ask(appActorKey(command.appId), command);
    } catch (error) {
      throw new AppError(500, "Failed to send", { cause: error });
    }
    if (result.ok) return result;
    if (result.status >= 500) {
      throw new AppError(500, "Failed to send", { cause: new Error(result.message) });
    }
    throw new AppError(result.status, result.message);
  }

  return routes;
}
