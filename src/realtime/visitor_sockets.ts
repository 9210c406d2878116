/**
 * The visitor WebSockets attached to this process, by application and client, and the one way a
 * frame reaches one: bounded (a socket that does not read is closed, a visitor holds at most
 * {@linkcode MAX_SOCKETS_PER_VISITOR}), and held while a socket is still in its upgrade, since
 * Deno never opens nor closes one whose client left during it.
 */
import type { WatchedClient } from "../db/realtime.ts";
import { closeSocket, POLICY_VIOLATION } from "./socket_close.ts";

/** Who a visitor socket belongs to. */
export interface Visitor {
  appId: number;
  clientId: number;
}

/** The sockets returned by {@linkcode createVisitorSockets}. */
export interface VisitorSockets {
  /** Adds `socket` for `who`; false when it is closing or closed, or attached already. */
  attach(socket: WebSocket, who: Visitor): boolean;
  /** The open or opening sockets of one client. */
  of(appId: number, clientId: number): ReadonlySet<WebSocket> | undefined;
  /** Whether any socket of `appId` is attached here. */
  hasApp(appId: number): boolean;
  /** The clients of `appIds` with a socket here. */
  watchedClients(appIds: Iterable<number>): WatchedClient[];
  /** Applications with a socket here. */
  apps(): Iterable<number>;
  /**
   * Sends without ever throwing: a socket still in its upgrade keeps the frame until it opens;
   * one that has more than {@linkcode MAX_UNREAD_BYTES} unread is closed instead; a socket that
   * is closing simply misses the frame.
   */
  send(socket: WebSocket, data: string): void;
  /** Closes every socket (going away) and forgets them. */
  closeAll(): void;
  /** Sockets attached and not closed yet. */
  readonly count: number;
}

/**
 * Most bytes a socket may leave unread before it is closed: a client that does not read must
 * not make the server hold every frame sent to it. A visitor that reconnects reads its history.
 */
export const MAX_UNREAD_BYTES = 1_048_576;
/** Most sockets one visitor may hold at once here; a new one closes the oldest. */
export const MAX_SOCKETS_PER_VISITOR = 20;

/** Creates an empty set of sockets; one still in its upgrade after `openDeadlineMs` is forgotten. */
export function createVisitorSockets(openDeadlineMs: number): VisitorSockets {
  /** Sockets by application, then by client. */
  const sockets = new Map<number, Map<number, Set<WebSocket>>>();
  /** Frames kept for sockets still in their upgrade, sent in order once they open. */
  const opening = new Map<
    WebSocket,
    { frames: string[]; deadline: ReturnType<typeof setTimeout> }
  >();
  let count = 0;

  function detach(socket: WebSocket, who: Visitor): void {
    const clients = sockets.get(who.appId);
    const set = clients?.get(who.clientId);
    if (!clients || !set?.delete(socket)) return;
    count -= 1;
    if (set.size === 0) clients.delete(who.clientId);
    if (clients.size === 0) sockets.delete(who.appId);
  }

  function send(socket: WebSocket, data: string): void {
    const upgrade = opening.get(socket);
    if (upgrade) {
      upgrade.frames.push(data);
      return;
    }
    if (socket.readyState !== WebSocket.OPEN) return;
    if (socket.bufferedAmount > MAX_UNREAD_BYTES) {
      closeSocket(socket, POLICY_VIOLATION, "Frames are not being read");
      return;
    }
    try {
      socket.send(data);
    } catch {
      // It closed between the check and the send; its close event detaches it.
    }
  }

  return {
    attach(socket, who) {
      if (socket.readyState === WebSocket.CLOSING || socket.readyState === WebSocket.CLOSED) {
        return false;
      }
      let clients = sockets.get(who.appId);
      if (!clients) sockets.set(who.appId, clients = new Map());
      let set = clients.get(who.clientId);
      if (!set) clients.set(who.clientId, set = new Set());
      if (set.has(socket)) return false;
      if (set.size >= MAX_SOCKETS_PER_VISITOR) {
        const oldest = set.values().next().value!;
        detach(oldest, who);
        closeSocket(oldest, POLICY_VIOLATION, "Too many sockets for this visitor");
      }
      set.add(socket);
      count += 1;
      socket.addEventListener("close", () => detach(socket, who), { once: true });
      if (socket.readyState === WebSocket.CONNECTING) {
        const upgrade = {
          frames: [] as string[],
          deadline: setTimeout(() => {
            opening.delete(socket);
            detach(socket, who);
          }, openDeadlineMs),
        };
        opening.set(socket, upgrade);
        socket.addEventListener("open", () => {
          clearTimeout(upgrade.deadline);
          if (opening.get(socket) !== upgrade) return;
          opening.delete(socket);
          for (const data of upgrade.frames) send(socket, data);
        }, { once: true });
        socket.addEventListener("close", () => {
          clearTimeout(upgrade.deadline);
          opening.delete(socket);
        }, { once: true });
      }
      return true;
    },
    of: (appId, clientId) => sockets.get(appId)?.get(clientId),
    hasApp: (appId) => sockets.has(appId),
    watchedClients(appIds) {
      const clients: WatchedClient[] = [];
      for (const appId of new Set(appIds)) {
        for (const clientId of sockets.get(appId)?.keys() ?? []) clients.push({ appId, clientId });
      }
      return clients;
    },
    apps: () => sockets.keys(),
    send,
    closeAll() {
      for (const clients of sockets.values()) {
        for (const set of clients.values()) {
          for (const socket of set) closeSocket(socket);
        }
      }
      sockets.clear();
      for (const { deadline } of opening.values()) clearTimeout(deadline);
      opening.clear();
      count = 0;
    },
    get count() {
      return count;
    },
  };
}
