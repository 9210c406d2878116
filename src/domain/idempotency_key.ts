/**
 * The Idempotency-Key header of `POST /openapi/v1/messages` (an extension, CONTRACT §2.6 style):
 * a client that sends the same key again — a retry after a timeout, a 500, a lost connection —
 * gets the message its first request stored instead of a second one, for
 * {@linkcode IDEMPOTENCY_KEY_HOURS} hours. Any 1 to 255 printable ASCII characters (a UUID, say),
 * compared exactly; the key is the application's.
 */
import { AppError } from "./app_error.ts";

/** How long a key names its message. */
export const IDEMPOTENCY_KEY_HOURS = 24;

/** The 400 of a malformed key. */
export const IDEMPOTENCY_KEY_INVALID =
  "Idempotency-Key must be 1 to 255 printable ASCII characters";

/** The 422 of a key reused for a request that asks something else. */
export const IDEMPOTENCY_KEY_REUSED = "Idempotency-Key was already used for a different request";

/**
 * The 409 of a key whose earlier request stored nothing though it came with the same key in the
 * same instant (it was answered with its own error): the retry may go again.
 */
export const IDEMPOTENCY_KEY_IN_USE = "A request with the same Idempotency-Key is in progress";

/** A well-formed key: 1 to 255 printable ASCII characters. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;

/** The key of a header value (null when there is no header); throws the 400 when malformed. */
export function parseIdempotencyKey(header: string | null | undefined): string | null {
  if (header === null || header === undefined) return null;
  if (!IDEMPOTENCY_KEY_PATTERN.test(header)) throw new AppError(400, IDEMPOTENCY_KEY_INVALID);
  return header;
}

/**
 * What a keyed request asks, as the text its fingerprint hashes: the same conversation, type and
 * content are the same request, however the body was written (JSON or a form, `chat_id` a number
 * or a string of digits).
 */
export function requestIdentity(chatId: number, messageType: string, content: string): string {
  return JSON.stringify([chatId, messageType, content]);
}
