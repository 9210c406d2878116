/**
 * Fixtures of the realtime tests: a real HTTP server that upgrades visitor WebSockets and
 * attaches them to a hub, real client sockets that record their frames, data helpers, and a
 * TCP proxy that can cut and hold the LISTEN connection to simulate an outage.
 */
import assert from "node:assert/strict";
import type { Sql } from "../../src/db/client.ts";
import { commitBatch } from "../../src/db/write_batch.ts";
import type { CommandResult } from "../../src/actors/protocol.ts";
import { createRealtimeHub, type RealtimeHub, type VisitorFrame } from "../../src/realtime/hub.ts";
import { listenForChanges } from "../../src/realtime/listener.ts";
import { eventually } from "./eventually.ts";

/** Resolves once `condition` holds, polling; fails after `timeoutMs`. */
export async function waitUntil(
  condition: () => boolean,
  what: string,
  timeoutMs = 5_000,
): Promise<void> {
  await eventually(() => Promise.resolve(condition()), Boolean, what, timeoutMs);
}

/** Resolves after `ms` milliseconds. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function value<T>(result: CommandResult): T {
  assert.equal(result.ok, true, JSON.stringify(result));
  return (result as { value: T }).value;
}

/** Creates a web visitor of `appId`; returns its client id. */
export async function createVisitor(sql: Sql, appId: number): Promise<number> {
  const tokenHash = crypto.randomUUID();
  const [created] = await commitBatch(sql, [
    { kind: "visitor.create", appId, tokenHash, name: null, email: null },
  ]);
  return value<{ client_id: number }>(created).client_id;
}

/** A visitor message as committed. */
export interface Sent {
  chat_id: number;
  message_id: number;
}

/** Commits visitor messages, `[appId, clientId, content]` each, in one batch. */
export async function sendMessages(
  sql: Sql,
  messages: [number, number, string][],
): Promise<Sent[]> {
  const results = await commitBatch(
    sql,
    messages.map(([appId, clientId, content]) => ({
      kind: "visitor.message",
      appId,
      clientId,
      messageType: "text",
      content,
    })),
  );
  return results.map((result) => value<Sent>(result));
}

/** A client-side visitor socket and the frames it received. */
export interface VisitorSocket {
  frames: VisitorFrame[];
  /** Contents of the `message.created` frames, in order. */
  contents(): string[];
  /** The code the socket was closed with; null while it is open. */
  closeCode(): number | null;
  close(): Promise<void>;
}

/** A hub behind a real WebSocket server, optionally fed by a real listener. */
export interface HubServer extends AsyncDisposable {
  hub: RealtimeHub;
  /** How many times the listener reported a reconnect. */
  reconnects: number;
  /**
   * Opens a visitor socket as `clientId` of `appId` — attached late, catching up from `since`,
   * when given.
   */
  connect(appId: number, clientId: number, since?: Date): Promise<VisitorSocket>;
}

/** Options of {@linkcode startHubServer}. */
export interface HubServerOptions {
  /** Pool of the hub's reads. */
  sql: Sql;
  /** Pool of the LISTEN connection; no listener when absent. */
  listenSql?: Sql;
  /** @default 30_000 */
  replayWindowMs?: number;
}

/** Starts a hub, a server attaching upgraded sockets to it and, optionally, a listener. */
export async function startHubServer(options: HubServerOptions): Promise<HubServer> {
  const hub = createRealtimeHub({ sql: options.sql, replayWindowMs: options.replayWindowMs });
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen() {} }, (request) => {
    const url = new URL(request.url);
    const { socket, response } = Deno.upgradeWebSocket(request);
    const since = url.searchParams.get("since");
    hub.attachVisitor(socket, {
      appId: Number(url.searchParams.get("app")),
      clientId: Number(url.searchParams.get("client")),
    }, since === null ? {} : { since: new Date(Number(since)) });
    return response;
  });
  const fixture: HubServer = {
    hub,
    reconnects: 0,
    connect,
    [Symbol.asyncDispose]: dispose,
  };
  const listener = options.listenSql
    ? await listenForChanges({
      sql: options.listenSql,
      onNotice: (payload) => void hub.handleNotice(payload),
      onReconnect: () => {
        fixture.reconnects += 1;
        void hub.replay();
      },
    })
    : null;
  const sockets: VisitorSocket[] = [];

  async function connect(appId: number, clientId: number, since?: Date): Promise<VisitorSocket> {
    const socket = new WebSocket(
      `ws://127.0.0.1:${server.addr.port}/?app=${appId}&client=${clientId}` +
        (since ? `&since=${since.getTime()}` : ""),
    );
    const frames: VisitorFrame[] = [];
    socket.onmessage = (event) => frames.push(JSON.parse(event.data));
    let closeCode: number | null = null;
    const closed = new Promise((resolve) =>
      socket.addEventListener("close", (event) => {
        closeCode = event.code;
        resolve(event);
      })
    );
    await new Promise((resolve, reject) => {
      socket.onopen = resolve;
      socket.onerror = reject;
    });
    const visitor: VisitorSocket = {
      frames,
      contents: () =>
        frames.flatMap((frame) => frame.type === "message.created" ? [frame.message.content] : []),
      closeCode: () => closeCode,
      async close() {
        if (socket.readyState !== WebSocket.CLOSED) socket.close();
        await closed;
      },
    };
    sockets.push(visitor);
    return visitor;
  }

  async function dispose(): Promise<void> {
    await listener?.stop();
    await Promise.all(sockets.map((socket) => socket.close()));
    await waitUntil(() => hub.socketCount === 0, "the server side of the sockets to close");
    hub.stop();
    await server.shutdown();
  }

  return fixture;
}

/** A TCP proxy to PostgreSQL whose connections can be cut and held. */
export interface OutageProxy extends AsyncDisposable {
  /** Connection URL through the proxy. */
  url: string;
  /** Cuts every connection and holds new ones until {@linkcode OutageProxy.restore}. */
  cut(): void;
  /** Lets held and new connections through. */
  restore(): void;
}

/** Starts a proxy to the server of `databaseUrl`. */
export function startOutageProxy(databaseUrl: string): OutageProxy {
  const target = new URL(databaseUrl);
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  const handlers = new Set<Promise<void>>();
  let gate = Promise.withResolvers<void>();
  gate.resolve();

  async function relay(inbound: Deno.Conn): Promise<void> {
    conns.add(inbound);
    await gate.promise;
    if (!conns.has(inbound)) return;
    const outbound = await Deno.connect({ hostname: target.hostname, port: Number(target.port) });
    conns.add(outbound);
    await Promise.allSettled([
      inbound.readable.pipeTo(outbound.writable),
      outbound.readable.pipeTo(inbound.writable),
    ]);
    closeConn(inbound);
    closeConn(outbound);
  }

  function closeConn(conn: Deno.Conn): void {
    if (!conns.delete(conn)) return;
    try {
      conn.close();
    } catch {
      // Already closed by its pipe.
    }
  }

  const accepting = (async () => {
    try {
      for await (const conn of listener) {
        const handler = relay(conn).catch(() => closeConn(conn));
        handlers.add(handler);
        handler.finally(() => handlers.delete(handler));
      }
    } catch {
      // The listener was closed.
    }
  })();

  const url = new URL(databaseUrl);
  url.hostname = "127.0.0.1";
  url.port = String((listener.addr as Deno.NetAddr).port);
  url.searchParams.delete("host"); // through the proxy's TCP port, not the server's Unix socket
  return {
    url: url.toString(),
    cut() {
      gate = Promise.withResolvers<void>();
      for (const conn of [...conns]) closeConn(conn);
    },
    restore() {
      gate.resolve();
    },
    async [Symbol.asyncDispose]() {
      listener.close();
      gate.resolve();
      for (const conn of [...conns]) closeConn(conn);
      await accepting;
      await Promise.allSettled([...handlers]);
    },
  };
}
