/**
 * How the server closes a visitor's WebSocket: the close codes it uses, and a close that waits for
 * a socket still in its upgrade (Deno cannot close one before it opens) and never throws.
 */

/** WebSocket close code of a server going away. */
export const GOING_AWAY = 1001;
/** WebSocket close code of a policy violation (too slow a reader, too many sockets, bad token). */
export const POLICY_VIOLATION = 1008;
/** WebSocket close code of a frame too large (a client frame on a send-only socket). */
export const MESSAGE_TOO_BIG = 1009;
/** WebSocket close code of a server error (a socket's catch-up or token could not be read). */
export const INTERNAL_ERROR_CLOSE = 1011;

/**
 * Closes `socket` with `code` and `reason` — once it opens, when its upgrade is still going on
 * (Deno cannot close a socket before) — and never throws.
 */
export function closeSocket(
  socket: WebSocket,
  code = GOING_AWAY,
  reason = "Server is shutting down",
): void {
  if (socket.readyState === WebSocket.CONNECTING) {
    socket.addEventListener("open", () => closeSocket(socket, code, reason), { once: true });
    return;
  }
  try {
    socket.close(code, reason);
  } catch {
    // Already closing: nothing more to do.
  }
}
