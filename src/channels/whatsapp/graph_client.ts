/**
 * The WhatsApp Cloud (Graph) API as Parley uses it: send one message, and look up and download
 * media. Everything goes to `WHATSAPP_GRAPH_URL` with the channel's access token as a Bearer
 * token. Failures come back as data in Meta's terms (HTTP status, error code and subcode,
 * `Retry-After`), never as exceptions, so that the sender can decide what to do with each.
 */
import { fetchMedia } from "../media_fetch.ts";
import type { WhatsAppMessage } from "../../domain/whatsapp_messages.ts";
import { parseRetryAfter } from "../../domain/delivery_schedule.ts";
import { isMetaMediaHost } from "../../domain/media_hosts.ts";
import { recipientFields, type WhatsAppRecipient } from "../../domain/whatsapp_recipient.ts";

/** How long one Graph API call may take. */
const TIMEOUT_MS = 15_000;

/** A failed call, as Meta described it. */
export interface GraphFailure {
  /** HTTP status; 0 when no answer came (network error, timeout). */
  status: number;
  /** Meta's `error.code`, when the body had one. */
  code: number | null;
  subcode: number | null;
  message: string;
  /** `Retry-After`, in milliseconds, when the answer had one. */
  retryAfterMs: number | null;
}

/** What a send answered. */
/**
 * What a send came to. `wamid` is null when Meta accepted the message (2xx) but its answer could
 * not be read (the connection cut partway): the customer has it, under an id Parley never learnt.
 */
export type SendResult =
  | { ok: true; wamid: string | null }
  | { ok: false; failure: GraphFailure };

/** Where and as whom calls go. */
export interface GraphAccess {
  graphUrl: string;
  accessToken: string;
}

async function failureOf(response: Response): Promise<GraphFailure> {
  const text = await response.text().catch(() => "");
  let error: { code?: unknown; error_subcode?: unknown; message?: unknown } = {};
  try {
    error = JSON.parse(text)?.error ?? {};
  } catch {
    // not Meta's JSON
  }
  const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"), Date.now());
  return {
    status: response.status,
    code: typeof error.code === "number" ? error.code : null,
    subcode: typeof error.error_subcode === "number" ? error.error_subcode : null,
    message: typeof error.message === "string" ? error.message : `HTTP ${response.status}`,
    retryAfterMs: retryAfterMs !== null && retryAfterMs > 0 ? retryAfterMs : null,
  };
}

function networkFailure(error: unknown): GraphFailure {
  const message = error instanceof Error ? error.message : String(error);
  return { status: 0, code: null, subcode: null, message, retryAfterMs: null };
}

/**
 * Sends one message to `recipient` (as `to` for a phone number, `recipient` for a BSUID) from the
 * business number `phoneNumberId`.
 */
export async function sendWhatsAppMessage(
  access: GraphAccess,
  phoneNumberId: string,
  recipient: WhatsAppRecipient,
  message: WhatsAppMessage,
): Promise<SendResult> {
  let response: Response;
  try {
    response = await fetch(`${access.graphUrl}/${encodeURIComponent(phoneNumberId)}/messages`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${access.accessToken}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({
        messaging_product: "whatsapp",
        recipient_type: "individual",
        ...recipientFields(recipient),
        ...message,
      }),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (error) {
    return { ok: false, failure: networkFailure(error) };
  }
  if (!response.ok) return { ok: false, failure: await failureOf(response) };
  // Accepted: sending it again would deliver it twice, whatever the answer's body says.
  const body = await response.json().catch(() => null);
  const wamid = body?.messages?.[0]?.id;
  return { ok: true, wamid: typeof wamid === "string" && wamid !== "" ? wamid : null };
}

/** Media as the Graph API describes it. */
export interface MediaInfo {
  url: string;
  mimeType: string | null;
}

/** Looks media up; its download URL expires after a few minutes. */
export async function lookUpMedia(
  access: GraphAccess,
  mediaId: string,
): Promise<{ ok: true; media: MediaInfo } | { ok: false; failure: GraphFailure }> {
  let response: Response;
  try {
    response = await fetch(`${access.graphUrl}/${encodeURIComponent(mediaId)}`, {
      headers: { authorization: `Bearer ${access.accessToken}` },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (error) {
    return { ok: false, failure: networkFailure(error) };
  }
  if (!response.ok) return { ok: false, failure: await failureOf(response) };
  const body = await response.json().catch(() => null);
  if (typeof body?.url !== "string") {
    return {
      ok: false,
      failure: {
        status: 502,
        code: null,
        subcode: null,
        message: "no media url",
        retryAfterMs: null,
      },
    };
  }
  return {
    ok: true,
    media: { url: body.url, mimeType: typeof body.mime_type === "string" ? body.mime_type : null },
  };
}

/** Starts downloading media from its (short-lived) URL; the body is left to stream. */
export async function downloadMedia(
  access: GraphAccess,
  url: string,
): Promise<{ ok: true; response: Response } | { ok: false; failure: GraphFailure }> {
  if (!isMetaMediaHost(url, access.graphUrl)) {
    return {
      ok: false,
      failure: {
        status: 502,
        code: null,
        subcode: null,
        message: "not a Meta host",
        retryAfterMs: null,
      },
    };
  }
  let response: Response;
  try {
    // The token goes only to Meta's own hosts: no redirect is followed.
    response = await fetchMedia(url, {
      headers: { authorization: `Bearer ${access.accessToken}` },
    }, { headersMs: TIMEOUT_MS });
  } catch (error) {
    return { ok: false, failure: networkFailure(error) };
  }
  if (!response.ok) return { ok: false, failure: await failureOf(response) };
  return { ok: true, response };
}
