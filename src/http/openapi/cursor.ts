/**
 * The opaque `before` cursor of `GET /conversations`: the last row of a page (its activity time
 * and id), base64url-encoded so that clients pass it back without reading it.
 */

import { isoTimeMs } from "../../domain/iso_time.ts";

/** Where a page ended. */
export interface ConversationCursor {
  lastMessageAt: string;
  id: number;
}

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** Encodes the position after the conversation `last`. */
export function encodeCursor(last: ConversationCursor): string {
  const bytes = new TextEncoder().encode(`${last.lastMessageAt}|${last.id}`);
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_")
    .replace(/=+$/, "");
}

/** Decodes a cursor; null when `text` is not one this module made. */
export function decodeCursor(text: string): ConversationCursor | null {
  if (!/^[A-Za-z0-9_-]{1,100}$/.test(text)) return null;
  let decoded: string;
  try {
    decoded = atob(text.replaceAll("-", "+").replaceAll("_", "/"));
  } catch {
    return null;
  }
  const [lastMessageAt, id, ...rest] = decoded.split("|");
  if (rest.length > 0 || !TIMESTAMP.test(lastMessageAt ?? "")) return null;
  if (
    isoTimeMs(lastMessageAt) === null || lastMessageAt.startsWith("0000") ||
    !/^[1-9][0-9]{0,15}$/.test(id ?? "")
  ) return null;
  return { lastMessageAt, id: Number(id) };
}
