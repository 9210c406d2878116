/**
 * WhatsApp Cloud API webhook bodies (CONTRACT §6.1) read into plain items: a customer's message
 * (text — locations, shared contacts, reactions, orders and WhatsApp Flow answers rendered as
 * readable text — or an `image`/`file` naming the Meta media id), a click on an interactive reply
 * button, list row or template quick-reply button, a change of the customer's number or user id,
 * or a status update of a message Parley sent. A batch
 * carries up to 1,000 updates from many customers, so every message and status is read on its
 * own and one that cannot be read is skipped with its JSON path and the reason, never failing
 * the rest. Meta adds fields over time; unknown fields are ignored and unknown message types
 * become readable text rather than being dropped. Pure: no I/O.
 */
import { z } from "zod";
import { describeIssue } from "../../domain/message_kinds.ts";
import { MAX_JSON_DEPTH } from "../../domain/json_document.ts";
import { type AdReferral, readAdReferral } from "../../domain/ad_referral.ts";

/**
 * The WhatsApp user who wrote: their WhatsApp id (phone number) when Meta shares it, their
 * business-scoped user id (BSUID, e.g. `US.13491208655302741918`) when Meta sends one — at least
 * one of the two is set — and their profile name, if Meta sent one.
 */
export interface InboundCustomer {
  waId: string | null;
  userId: string | null;
  name: string | null;
}

/** A media attachment, still on Meta's servers under `id`. */
export interface InboundMedia {
  id: string;
  mimeType: string | null;
  kind: "image" | "audio" | "video" | "document" | "sticker";
  caption: string | null;
  /** Only documents carry a file name. */
  filename: string | null;
}

/**
 * What a customer's message carries once normalized: text (location, contacts, reactions and
 * unsupported types rendered as readable text), or media as a Parley `image` or `file`.
 */
export type InboundContent =
  | { messageType: "text"; text: string }
  | { messageType: "image" | "file"; media: InboundMedia };

/** What a customer's message and click share; `timestamp` is Meta's time as ISO 8601 UTC. */
interface CustomerUpdate {
  phoneNumberId: string;
  customer: InboundCustomer;
  wamid: string;
  timestamp: string;
}

/**
 * One update of a webhook batch. A `click` is an interactive `button_reply`/`list_reply`
 * (`replyId` is the id Parley sent) or a template quick-reply `button` (`replyId` is its
 * payload); `contextWamid` names the message clicked in. A `message` names in `replyToWamid` the
 * message it quotes, when the customer replied to one (Meta's `context.id`). An `identity` is a `system` message
 * (`user_changed_number`, `user_changed_user_id`): not the customer's words, but ids of theirs.
 * A `failed` status carries Meta's error.
 */
export type InboundItem =
  | CustomerUpdate & {
    kind: "message";
    content: InboundContent;
    /** The wamid of the message the customer replied to (swipe-to-reply), if any. */
    replyToWamid: string | null;
    /** The ad or post the customer came from (Meta's `referral`, on their first message). */
    referral: AdReferral | null;
  }
  | CustomerUpdate & { kind: "click"; contextWamid: string | null; replyId: string; title: string }
  | CustomerUpdate & {
    /** Meta's notice that the user changed their number or BSUID: the new ones, if named. */
    kind: "identity";
    newWaId: string | null;
    newUserId: string | null;
  }
  | {
    kind: "status";
    phoneNumberId: string;
    wamid: string;
    status: "sent" | "delivered" | "read" | "failed";
    timestamp: string;
    /** The customer's WhatsApp id, or else their BSUID, when Meta named one. */
    recipientId: string | null;
    error: { code: number; title: string } | null;
  };

/**
 * The items of a webhook body in body order, and what was left out: `path` is the JSON path of
 * the part skipped (`entry.0.changes.1.value.messages.3`; empty for the body itself).
 */
export interface ParsedWebhook {
  items: InboundItem[];
  skipped: { path: string; reason: string }[];
}

/** Why one part of the body is skipped; caught where that part is read. */
class SkippedPart extends Error {}

/**
 * The longest id read from a body. Meta's are far shorter (a wamid is about 60 characters, a
 * BSUID about 25); ids are stored in unique indexes, whose rows PostgreSQL caps at 2,704 bytes,
 * so a longer one failed its whole delivery's transaction — every message of the batch, at every
 * retry. Past this length the part is skipped instead.
 */
export const MAX_ID_LENGTH = 256;

const TOO_LONG = { error: `must be at most ${MAX_ID_LENGTH} characters` };
const ID = z.string().min(1).max(MAX_ID_LENGTH, TOO_LONG);
const OPTIONAL = z.string().optional();
/** An id that may be absent (a customer's ids in `contacts` and `system` messages). */
const OPTIONAL_ID = z.string().max(MAX_ID_LENGTH, TOO_LONG).optional();
const TIMESTAMP = z.union([z.string(), z.number()]);
const LIST = z.array(z.unknown()).optional();
const WEBHOOK = z.object({
  object: z.literal("whatsapp_business_account"),
  entry: z.array(z.unknown()),
});
const ENTRY = z.object({ changes: z.array(z.unknown()) });
const CHANGE = z.object({ field: z.unknown(), value: z.unknown() });
const CHANGE_VALUE = z.object({
  metadata: z.object({ phone_number_id: ID }),
  contacts: LIST,
  messages: LIST,
  statuses: LIST,
  errors: LIST,
});
const CONTACT = z.object({
  wa_id: OPTIONAL_ID,
  user_id: OPTIONAL_ID,
  profile: z.object({ name: OPTIONAL }).optional(),
});
/** Meta's error codes are 32-bit integers (the column too); any other number is unreadable. */
const META_ERROR = z.object({
  code: z.int().min(-(2 ** 31)).max(2 ** 31 - 1),
  title: OPTIONAL,
  message: OPTIONAL,
});
const MESSAGE = z.object({
  id: ID,
  from: ID.optional(),
  from_user_id: ID.optional(),
  timestamp: TIMESTAMP,
  type: ID,
  context: z.object({ id: OPTIONAL }).optional(),
});
const TEXT = z.object({ body: z.string() });
const MEDIA = z.object({ id: ID, mime_type: OPTIONAL, caption: OPTIONAL, filename: OPTIONAL });
const LOCATION = z.object({
  latitude: z.number(),
  longitude: z.number(),
  name: OPTIONAL,
  address: OPTIONAL,
  url: OPTIONAL,
});
const CONTACT_NAME = z.object({
  formatted_name: OPTIONAL,
  first_name: OPTIONAL,
  last_name: OPTIONAL,
});
const PHONES = z.array(z.object({ phone: OPTIONAL, wa_id: OPTIONAL })).optional();
const SHARED_CONTACTS = z.array(z.object({ name: CONTACT_NAME.optional(), phones: PHONES })).min(1);
const REACTION = z.object({ emoji: OPTIONAL });
const REPLY = z.object({ id: z.string(), title: z.string() });
const INTERACTIVE = z.object({ type: z.string() });
const FLOW_REPLY = z.object({ response_json: z.string() });
const ORDER = z.object({
  text: OPTIONAL,
  product_items: z.array(z.object({
    product_retailer_id: z.string(),
    quantity: z.union([z.number(), z.string()]),
    item_price: z.union([z.number(), z.string()]),
    currency: z.string(),
  })).optional(),
});
const BUTTON = z.object({ payload: z.string(), text: z.string() });
const UNSUPPORTED = z.object({ type: OPTIONAL }).optional();
const SYSTEM = z.object({
  type: OPTIONAL,
  wa_id: OPTIONAL_ID,
  new_wa_id: OPTIONAL_ID,
  user_id: OPTIONAL_ID,
  previous_user_id: OPTIONAL_ID,
});
/** The `system` messages that name a user's new ids. */
const IDENTITY_CHANGES = ["user_changed_number", "user_changed_user_id"];
const ERROR_TITLES = z.array(z.object({ title: OPTIONAL })).optional();
const STATUS = z.object({
  id: ID,
  status: z.enum(["sent", "delivered", "read", "failed"]),
  timestamp: TIMESTAMP,
  recipient_id: OPTIONAL,
  recipient_user_id: OPTIONAL,
  errors: LIST,
});

const MEDIA_KINDS = ["image", "sticker", "audio", "video", "document"] as const;
/** What a message carries: content, or the reply it clicked. */
type MessageBody =
  | { kind: "content"; content: InboundContent }
  | { kind: "click"; replyId: string; title: string };

/** Whether `value` has something other than whitespace in it. */
function isPresent(value: string | undefined): value is string {
  return value !== undefined && /\S/.test(value);
}

/**
 * `value` as PostgreSQL stores it: without NUL characters, which text cannot hold, and with a
 * lone surrogate as U+FFFD (as postgres.js sends text; jsonb refuses one outright).
 */
function storable(value: string): string {
  const wellFormed = value.toWellFormed();
  return wellFormed.includes("\0") ? wellFormed.replaceAll("\0", "") : wellFormed;
}

/**
 * `value` (parsed JSON) with every string, keys included, {@linkcode storable}. Whatever nests
 * deeper than {@linkcode MAX_JSON_DEPTH} becomes null: no part Parley reads is that deep, and a
 * deeper one (a signed body may carry anything) would overflow the stack here.
 */
function withoutNul(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return storable(value);
  if (typeof value !== "object" || value === null) return value;
  if (depth >= MAX_JSON_DEPTH) return null;
  if (Array.isArray(value)) return value.map((inner) => withoutNul(inner, depth + 1));
  return Object.fromEntries(
    Object.entries(value).map(([key, inner]) => [storable(key), withoutNul(inner, depth + 1)]),
  );
}

/**
 * `value` read with `schema`; otherwise throws why, naming the first failing field by its path
 * within the part being read (`at` is where `value` sits in it, `subject` names the part itself).
 */
function read<T>(schema: z.ZodType<T>, value: unknown, at: string, subject = at): T {
  const parsed = schema.safeParse(value, { error: describeIssue });
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const path = [at, ...issue.path.map(String)].filter((part) => part !== "").join(".");
  throw new SkippedPart(`${path || subject} ${issue.message}`);
}

/** Runs `readPart`; when it throws a {@linkcode SkippedPart}, records the part at `path` as skipped. */
function guarded(result: ParsedWebhook, path: string, readPart: () => unknown): void {
  try {
    readPart();
  } catch (error) {
    if (!(error instanceof SkippedPart)) throw error;
    result.skipped.push({ path, reason: error.message });
  }
}

/** The last second of year 9999: later instants have no four-digit ISO 8601 form. */
const LATEST_SECONDS = 253_402_300_799;

/** Meta's Unix seconds (a string of digits, or a number) as ISO 8601 UTC. */
function isoTimestamp(value: string | number): string {
  const seconds = typeof value === "number" ? value : /^\d+$/.test(value) ? Number(value) : NaN;
  const date = new Date(seconds * 1000);
  if (!Number.isSafeInteger(seconds) || seconds < 0 || seconds > LATEST_SECONDS) {
    throw new SkippedPart(`timestamp ${JSON.stringify(value)} is not Unix seconds`);
  }
  return date.toISOString();
}

/** Text content. */
function textBody(text: string): MessageBody {
  return { kind: "content", content: { messageType: "text", text } };
}

/**
 * `📍 Name, Address (lat, long) https://maps.google.com/?q=lat,long`, then the place's own `url`
 * (its website) when it has one.
 */
function locationText(location: z.infer<typeof LOCATION>): string {
  const { latitude, longitude } = location;
  const label = [location.name, location.address].filter(isPresent).join(", ");
  const at = `(${latitude}, ${longitude}) https://maps.google.com/?q=${latitude},${longitude}`;
  const place = `📍 ${label === "" ? at : `${label} ${at}`}`;
  return isPresent(location.url) ? `${place}\n${location.url}` : place;
}

/**
 * A WhatsApp Flow's answers (`response_json`): one `field: value` line per field, the Flow's own
 * `flow_token` left out; a value that is no string is shown as JSON. Answers that are not a JSON
 * object are shown as they came.
 */
function flowReplyText(responseJson: string): string {
  let answers: unknown;
  try {
    answers = JSON.parse(responseJson);
  } catch {
    return responseJson;
  }
  if (typeof answers !== "object" || answers === null || Array.isArray(answers)) {
    return responseJson;
  }
  const lines = Object.entries(answers).filter(([field]) => field !== "flow_token").map((
    [field, value],
  ) => `${field}: ${typeof value === "string" ? value : JSON.stringify(value)}`);
  return lines.length === 0 ? "(empty form)" : lines.join("\n");
}

/** `🛒 Order`, the customer's note, then one `id × quantity @ price currency` line per item. */
function orderText(order: z.infer<typeof ORDER>): string {
  const items = (order.product_items ?? []).map((item) =>
    `${item.product_retailer_id} × ${item.quantity} @ ${item.item_price} ${item.currency}`
  );
  return ["🛒 Order", ...(isPresent(order.text) ? [order.text] : []), ...items].join("\n");
}

/** One `👤 Name, +phone, …` line per shared contact. */
function contactsText(contacts: z.infer<typeof SHARED_CONTACTS>): string {
  return contacts.map(({ name, phones }) => {
    const fullName = [name?.first_name, name?.last_name].filter(isPresent).join(" ");
    const shown = [name?.formatted_name, fullName].find(isPresent) ?? "Unnamed contact";
    const numbers = (phones ?? []).map((p) => p.phone ?? (p.wa_id && `+${p.wa_id}`));
    return [`👤 ${shown}`, ...numbers.filter(isPresent)].join(", ");
  }).join("\n");
}

/** `[Unsupported message type: <type>]`, with Meta's error title when it sent one. */
function unsupportedText(type: string, errors: unknown): string {
  const title = ERROR_TITLES.safeParse(errors).data?.find((e) => isPresent(e.title))?.title;
  return `[Unsupported message type: ${type}${title === undefined ? "" : ` (${title})`}]`;
}

/** A media message as `image` (images, stickers) or `file` (audio, video, documents). */
function mediaBody(kind: InboundMedia["kind"], object: z.infer<typeof MEDIA>): MessageBody {
  const shown = (text: string | undefined) => isPresent(text) ? text : null;
  const messageType = kind === "image" || kind === "sticker" ? "image" : "file";
  const media: InboundMedia = {
    id: object.id,
    mimeType: object.mime_type ?? null,
    kind,
    caption: shown(object.caption),
    filename: kind === "document" ? shown(object.filename) : null,
  };
  return { kind: "content", content: { messageType, media } };
}

/** What a message of `type` carries; throws when the type's own object cannot be read. */
function messageBody(message: Record<string, unknown>, type: string): MessageBody {
  if ((MEDIA_KINDS as readonly string[]).includes(type)) {
    const kind = type as InboundMedia["kind"];
    return mediaBody(kind, read(MEDIA, message[kind], kind));
  }
  switch (type) {
    case "text":
      return textBody(read(TEXT, message.text, "text").body);
    case "location":
      return textBody(locationText(read(LOCATION, message.location, "location")));
    case "contacts":
      return textBody(contactsText(read(SHARED_CONTACTS, message.contacts, "contacts")));
    case "reaction": {
      const { emoji } = read(REACTION, message.reaction, "reaction");
      return textBody(isPresent(emoji) ? `Reacted ${emoji} to a message` : "Removed a reaction");
    }
    case "button": {
      const button = read(BUTTON, message.button, "button");
      return { kind: "click", replyId: button.payload, title: button.text };
    }
    case "order":
      return textBody(orderText(read(ORDER, message.order, "order")));
    case "interactive": {
      const replyType = read(INTERACTIVE, message.interactive, "interactive").type;
      if (replyType === "nfm_reply") {
        const interactive = message.interactive as Record<string, unknown>;
        const reply = read(FLOW_REPLY, interactive.nfm_reply, "interactive.nfm_reply");
        return textBody(flowReplyText(reply.response_json));
      }
      if (replyType !== "button_reply" && replyType !== "list_reply") {
        return textBody(unsupportedText(`interactive ${replyType}`, message.errors));
      }
      const interactive = message.interactive as Record<string, unknown>;
      const reply = read(REPLY, interactive[replyType], `interactive.${replyType}`);
      return { kind: "click", replyId: reply.id, title: reply.title };
    }
    case "unsupported": {
      const shown = read(UNSUPPORTED, message.unsupported, "unsupported")?.type;
      return textBody(unsupportedText(isPresent(shown) ? shown : type, message.errors));
    }
    default:
      return textBody(unsupportedText(type, message.errors));
  }
}

/**
 * A customer's message or click; throws when it cannot be read. A user who hides their phone
 * number behind a username is named only by `from_user_id`; one of the two ids must be there.
 */
function messageItem(
  raw: unknown,
  phoneNumberId: string,
  contacts: Contacts,
): InboundItem {
  const message = read(MESSAGE, raw, "", "message");
  const timestamp = isoTimestamp(message.timestamp);
  if (message.type === "system") {
    return identityItem(raw as Record<string, unknown>, message, phoneNumberId, timestamp);
  }
  const contact = (message.from === undefined ? undefined : contacts.byWaId.get(message.from)) ??
    (message.from_user_id === undefined ? undefined : contacts.byUserId.get(message.from_user_id));
  const waId = message.from ?? contact?.waId ?? null;
  const userId = message.from_user_id ?? contact?.userId ?? null;
  if (waId === null && userId === null) throw new SkippedPart("from or from_user_id is required");
  const customer = { waId, userId, name: contact?.name ?? null };
  const body = messageBody(raw as Record<string, unknown>, message.type);
  const common = { phoneNumberId, customer, wamid: message.id, timestamp };
  // A reply quotes its message in `context.id`; a forwarded message has a `context` without one.
  const contextWamid = isPresent(message.context?.id) ? message.context.id : null;
  if (body.kind === "content") {
    const referral = readAdReferral((raw as Record<string, unknown>).referral);
    return {
      kind: "message",
      ...common,
      content: body.content,
      replyToWamid: contextWamid,
      referral,
    };
  }
  return { kind: "click", ...common, contextWamid, replyId: body.replyId, title: body.title };
}

/**
 * A `system` message naming the user's new number or BSUID (Meta sends no `contacts` with it);
 * throws for any other system message, which carries nothing of the customer's to keep.
 */
function identityItem(
  raw: Record<string, unknown>,
  message: z.infer<typeof MESSAGE>,
  phoneNumberId: string,
  timestamp: string,
): InboundItem {
  const system = read(SYSTEM, raw.system, "system");
  const type = system.type ?? "";
  if (!IDENTITY_CHANGES.includes(type)) {
    throw new SkippedPart(`system message ${JSON.stringify(type)} is not handled`);
  }
  const present = (value: string | undefined) => isPresent(value) ? value : null;
  const waId = message.from ?? null;
  const userId = present(system.previous_user_id) ?? message.from_user_id ?? null;
  if (waId === null && userId === null) {
    throw new SkippedPart("from or system.previous_user_id is required");
  }
  const newWaId = type === "user_changed_number"
    ? present(system.wa_id) ?? present(system.new_wa_id)
    : null;
  const newUserId = present(system.user_id);
  return {
    kind: "identity",
    phoneNumberId,
    customer: { waId, userId, name: null },
    wamid: message.id,
    timestamp,
    newWaId: newWaId === waId ? null : newWaId,
    newUserId: newUserId === userId ? null : newUserId,
  };
}

/** A status update; a failure carries Meta's first error. Throws when it cannot be read. */
function statusItem(raw: unknown, phoneNumberId: string): InboundItem {
  const status = read(STATUS, raw, "", "status");
  const timestamp = isoTimestamp(status.timestamp);
  const first = META_ERROR.safeParse(status.errors?.[0]).data;
  const error = status.status === "failed" && first !== undefined
    ? { code: first.code, title: [first.title, first.message].find(isPresent) ?? "Unknown error" }
    : null;
  const { id: wamid, status: state } = status;
  const recipientId = status.recipient_id ?? status.recipient_user_id ?? null;
  return { kind: "status", phoneNumberId, wamid, status: state, timestamp, recipientId, error };
}

/** One `contacts` entry: a user's ids (either may be missing) and profile name. */
interface Contact {
  waId: string | null;
  userId: string | null;
  name: string | null;
}

/** A change's `contacts`, by WhatsApp id and by BSUID. */
interface Contacts {
  byWaId: Map<string, Contact>;
  byUserId: Map<string, Contact>;
}

/** A change's `contacts` entries, by each id they carry (the first entry of an id wins). */
function contactsOf(entries: unknown[]): Contacts {
  const contacts: Contacts = { byWaId: new Map(), byUserId: new Map() };
  for (const entry of entries) {
    const parsed = CONTACT.safeParse(entry).data;
    if (parsed === undefined) continue;
    const name = parsed.profile?.name;
    const contact = {
      waId: isPresent(parsed.wa_id) ? parsed.wa_id : null,
      userId: isPresent(parsed.user_id) ? parsed.user_id : null,
      name: isPresent(name) ? name : null,
    };
    if (contact.waId !== null && !contacts.byWaId.has(contact.waId)) {
      contacts.byWaId.set(contact.waId, contact);
    }
    if (contact.userId !== null && !contacts.byUserId.has(contact.userId)) {
      contacts.byUserId.set(contact.userId, contact);
    }
  }
  return contacts;
}

/** Adds the messages and statuses of the `entry[].changes[]` element at `path` to `result`. */
function collectChange(result: ParsedWebhook, path: string, change: unknown): void {
  guarded(result, path, () => {
    const { field, value: raw } = read(CHANGE, change, "", "change");
    if (field !== "messages") {
      throw new SkippedPart(`field ${JSON.stringify(field)} is not handled`);
    }
    const value = read(CHANGE_VALUE, raw, "value");
    const phoneNumberId = value.metadata.phone_number_id;
    const contacts = contactsOf(value.contacts ?? []);
    value.messages?.forEach((message, i) => {
      const item = () => messageItem(message, phoneNumberId, contacts);
      guarded(result, `${path}.value.messages.${i}`, () => result.items.push(item()));
    });
    value.statuses?.forEach((status, i) => {
      const item = () => statusItem(status, phoneNumberId);
      guarded(result, `${path}.value.statuses.${i}`, () => result.items.push(item()));
    });
    value.errors?.forEach((raw, i) => {
      const error = META_ERROR.safeParse(raw).data;
      const title = [error?.title, error?.message].find(isPresent);
      const reason = `Meta reported error ${error?.code ?? ""}${title ? `: ${title}` : ""}`;
      result.skipped.push({ path: `${path}.value.errors.${i}`, reason: reason.trim() });
    });
  });
}

/**
 * Reads a WhatsApp Cloud API webhook body (JSON-parsed after its signature was checked) into
 * items in body order: for every `entry[].changes[]` of field `messages`, its `messages` then its
 * `statuses`. What cannot be read — a message or status missing fields or with a timestamp that is
 * not Unix seconds, a status Parley does not track (`played`), a change of another field, an error
 * Meta reports in a change, a body whose `object` is not `whatsapp_business_account` — is listed in
 * `skipped`. A message names its customer by `from` (their phone number) or, for a user who hides
 * it behind a username, only by `from_user_id` (their BSUID); the `contacts` entry whose `wa_id`
 * or `user_id` matches gives their profile name and the other id. Images and stickers become `image`, audio, video and documents `file`;
 * anything else that is not text becomes readable text (`[Unsupported message type: <type>]`).
 * A `system` message becomes an `identity` when it names the user's new number or BSUID, and is
 * skipped otherwise.
 */
export function parseWhatsAppWebhook(raw: unknown): ParsedWebhook {
  const result: ParsedWebhook = { items: [], skipped: [] };
  // PostgreSQL text cannot hold NUL: no string of the body keeps one (ids included, which a NUL
  // would otherwise make fail the whole batch they are applied in).
  const body = withoutNul(raw);
  guarded(result, "", () => {
    read(WEBHOOK, body, "", "body").entry.forEach((entry, e) => {
      guarded(result, `entry.${e}`, () => {
        const { changes } = read(ENTRY, entry, "", "entry");
        changes.forEach((change, c) => collectChange(result, `entry.${e}.changes.${c}`, change));
      });
    });
  });
  return result;
}
