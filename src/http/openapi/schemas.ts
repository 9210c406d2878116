/**
 * The zod schemas of the Open API's answers (SPEC §2, CONTRACT §2.4 and §3), and the shape in
 * which every route describes itself for the OpenAPI document. Request schemas sit beside the
 * handlers that validate with them; the document is generated from both.
 */
import { z } from "zod";
import { CONVERSATION_STATUSES } from "../../domain/conversation.ts";
import { MESSAGE_TYPES } from "../../domain/message_kinds.ts";
import { AD_REFERRAL_FIELDS } from "../../domain/ad_referral.ts";

const id = z.int().positive();

/** A timestamp as Parley writes it: UTC, six fractional digits, `Z`. */
export const TIMESTAMP = z.iso.datetime({ precision: 6 }).meta({
  description: "UTC ISO 8601 with exactly six fractional digits and Z",
  examples: ["2026-11-22T01:27:40.123456Z"],
});

/** A conversation (CONTRACT §2.4). */
export const CONVERSATION = z.strictObject({
  id,
  client_id: id,
  status: z.enum(CONVERSATION_STATUSES),
  channel: z.enum(["web", "whatsapp"]),
  last_message_at: TIMESTAMP,
  created_at: TIMESTAMP,
}).meta({ id: "Conversation" });

/** A stored message (CONTRACT §3). */
export const MESSAGE = z.strictObject({
  id,
  chat_id: id,
  sender_type: z.enum(["visitor", "agent", "bot", "ai", "flow", "system"]),
  sender_name: z.string().optional(),
  message_type: z.enum(MESSAGE_TYPES),
  content: z.string(),
  payload: z.unknown().optional().meta({
    description: "The parsed rich document (present for rich message types)",
  }),
  internal: z.literal(true).optional().meta({
    description: "An agent's internal note, never shown to the visitor",
  }),
  status: z.enum(["pending", "sent", "delivered", "read", "failed"]).optional(),
  error: z.strictObject({ code: z.int(), title: z.string().nullable() }).optional().meta({
    description: "Why a failed message failed: the platform's error code and title",
  }),
  referral: z.strictObject(
    Object.fromEntries(AD_REFERRAL_FIELDS.map((field) => [field, z.string().optional()])),
  ).optional().meta({
    description: "The ad or post a WhatsApp customer came from (Meta's referral of a message " +
      "sent from a Click-to-WhatsApp ad; ctwa_clid is the click id for Meta's Conversions API)",
  }),
  created_at: TIMESTAMP,
}).meta({ id: "Message" });

/** The error envelope. */
export const ERROR_ENVELOPE = z.strictObject({
  code: z.int().min(400).max(599),
  message: z.string(),
}).meta({ id: "Error" });

/** The success envelope around `data`. */
export function successEnvelope<T extends z.ZodType>(data: T) {
  return z.strictObject({ code: z.literal(0), data });
}

/** How a route describes itself for the OpenAPI document. */
export interface RouteDoc {
  method: "get" | "post" | "put" | "delete";
  /** OpenAPI path under `/openapi/v1`, e.g. `/conversations/{id}`. */
  path: string;
  summary: string;
  /** Query parameters (each property one parameter). */
  query?: z.ZodObject;
  /** Path parameters. */
  params?: z.ZodObject;
  /** Request headers beyond authentication (each property one header). */
  headerParams?: z.ZodObject;
  /** The request body and the media types it may come in. */
  body?: { schema: z.ZodType; mediaTypes: string[] };
  /** The success answer's `data` (or the whole answer, when `bare`). */
  data: z.ZodType;
  /** Response headers of the success answer beyond the rate-limit ones. */
  headers?: Record<string, string>;
  /** Error statuses this route answers beyond those of every route (401 unless public, 429, 500). */
  errors: number[];
  /** Whether the route needs no API key. */
  public?: true;
  /** Whether `data` is the whole answer, not wrapped in the envelope. */
  bare?: true;
  /** Whether the route extends SPEC.md (CONTRACT §2.6); marked `x-parley-extension`. */
  extension?: true;
}
