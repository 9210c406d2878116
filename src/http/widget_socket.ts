/**
 * The widget's WebSocket (CONTRACT §3, `GET /api/v1/widget/socket`): the handshake checked and
 * answered before anything is awaited, the visitor's token looked up after the upgrade when it
 * is not known yet, the socket then attached to the realtime hub. Frames go from the server to
 * the client only. A client that reconnects may name the `created_at` of the last frame it got
 * (`?since=`): the socket first catches up on what came after it.
 */
import type { Context } from "hono";
import { AppError } from "../domain/app_error.ts";
import { isoTimeMs } from "../domain/iso_time.ts";
import { describeError, log } from "../log.ts";
import {
  closeSocket,
  INTERNAL_ERROR_CLOSE,
  MESSAGE_TOO_BIG,
  POLICY_VIOLATION,
} from "../realtime/socket_close.ts";
import { type Visitor, type VisitorAuth, visitorTokenOf } from "./visitor_auth.ts";

/** Hands an open socket to the realtime hub (see `RealtimeHub.attachVisitor`). */
export type AttachVisitor = (
  socket: WebSocket,
  who: Visitor,
  options?: { since?: Date },
) => void;

/** Creates the socket route's handler. */
export function widgetSocketHandler(
  auth: VisitorAuth,
  attachVisitor: AttachVisitor,
): (c: Context) => Promise<Response> {
  return async function widgetSocket(c: Context): Promise<Response> {
    const token = visitorTokenOf(c);
    const upgrading = c.req.method === "GET" &&
      (c.req.header("upgrade") ?? "").toLowerCase() === "websocket";
    // Deno never completes an upgrade answered after its client left: the connection stays in
    // CLOSE-WAIT, a descriptor lost for good. So a handshake is answered before anything is
    // awaited: a token that needs the database is looked up once the socket is upgraded, and an
    // unknown one closes it with 1008. A request that is no upgrade may wait for its 401.
    const visitor = upgrading ? auth.knownVisitor(token) : await auth.authenticate(token);
    const resumeFrom = resumePoint(c.req.query("since"), Date.now());
    // RFC 6455 §4.1: a handshake is a GET (Hono also routes HEAD here). RFC 9110 §15.5.22: a 426
    // names the protocol to upgrade to.
    if (!upgrading) {
      throw new AppError(426, "Expected a WebSocket upgrade", {
        headers: { Upgrade: "websocket", Connection: "Upgrade" },
      });
    }
    // RFC 6455 §4.2.2: only version 13 is spoken, and the server names it.
    if (c.req.header("sec-websocket-version")?.trim() !== "13") {
      throw new AppError(426, "Unsupported WebSocket version", {
        headers: { Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Version": "13" },
      });
    }
    let upgraded;
    try {
      upgraded = Deno.upgradeWebSocket(c.req.raw);
    } catch (error) {
      // An incomplete handshake: no `Connection: Upgrade`, no `Sec-WebSocket-Key`.
      throw new AppError(400, "Invalid WebSocket handshake", { cause: error });
    }
    const { socket, response } = upgraded;
    socket.addEventListener("message", refuseLargeFrames);
    if (visitor) {
      attachVisitor(socket, visitor, resumeFrom === null ? undefined : { since: resumeFrom });
    } else {
      // Attached once its token is known, the socket first catches up on what its visitor got
      // since the upgrade (with a margin for the clocks of the database and this process), or
      // since the time its client resumes from.
      const since = resumeFrom ?? new Date(Date.now() - CATCH_UP_MARGIN_MS);
      auth.authenticate(token).then(
        (found) => {
          try {
            attachVisitor(socket, found, { since });
          } catch {
            // The instance began stopping during the lookup: the hub takes no more sockets.
            refuseSocket(socket, false);
          }
        },
        (error) => {
          if (!(error instanceof AppError)) {
            log("error", "socket token lookup failed", describeError(error));
          }
          refuseSocket(socket, error instanceof AppError);
        },
      );
    }
    return response;
  };
}

/**
 * How far before its upgrade a socket attached late catches up (see the socket route), and before
 * the time a reconnecting client resumes from: a message committed after one the client saw may
 * bear an earlier time.
 */
const CATCH_UP_MARGIN_MS = 1_000;

/** The furthest back a reconnecting client may resume from. */
export const MAX_RESUME_MS = 24 * 3_600_000;

/**
 * Where a reconnecting socket's catch-up starts: `since` (the `created_at` of the last frame its
 * client got) less the margin, no further back than {@linkcode MAX_RESUME_MS} and no later than
 * now less the margin; null without `since`. A `since` that is no ISO 8601 time is a 400.
 */
export function resumePoint(since: string | undefined, nowMs: number): Date | null {
  if (since === undefined) return null;
  const at = isoTimeMs(since);
  if (at === null) throw new AppError(400, "since must be an ISO 8601 time");
  const from = Math.min(at, nowMs) - CATCH_UP_MARGIN_MS;
  return new Date(Math.max(from, nowMs - MAX_RESUME_MS));
}

/**
 * Largest frame a visitor's socket takes from its client (CONTRACT §3: frames go from the server to
 * the client). Deno reads a whole frame (up to 64 MiB) before it is seen, so frames cannot be
 * refused before they arrive; a client sending big ones is closed after the first rather than
 * left to hold that memory again and again. Small ones (a client's keep-alive) are ignored.
 */
export const MAX_CLIENT_FRAME_BYTES = 1_024;

const utf8 = new TextEncoder();

function refuseLargeFrames(event: MessageEvent): void {
  const { data } = event;
  const size = typeof data === "string"
    // UTF-8 bytes: a character takes up to 3 (a surrogate pair 4 for its 2 code units).
    ? (data.length * 3 <= MAX_CLIENT_FRAME_BYTES ? data.length : utf8.encode(data).byteLength)
    : data instanceof ArrayBuffer
    ? data.byteLength
    : data instanceof Blob
    ? data.size
    : 0;
  if (size > MAX_CLIENT_FRAME_BYTES) {
    closeSocket(
      event.target as WebSocket,
      MESSAGE_TOO_BIG,
      "Frames from the client are not expected",
    );
  }
}

/** Closes an upgraded socket whose token is unknown (1008), or could not be looked up (1011). */
function refuseSocket(socket: WebSocket, unknown: boolean): void {
  if (unknown) closeSocket(socket, POLICY_VIOLATION, "Invalid or missing visitor token");
  else closeSocket(socket, INTERNAL_ERROR_CLOSE, "Internal server error");
}
