/**
 * The visitor sockets of the benchmark: one WebSocket per visitor on
 * `/api/v1/widget/socket`, and how long after a message was written its `message.created` frame
 * reached the socket (CONTRACT §3: within 100 ms of the commit, p99, on loopback). The start is
 * the message's `created_at` — PostgreSQL's clock when the row was inserted, a little before the
 * commit — so the figure is an upper bound of commit-to-socket; this process and PostgreSQL read
 * the same machine clock.
 */

/** What the sockets saw of the messages created in a time window. */
export interface SocketLatency {
  /** Frames received for messages created in the window. */
  frames: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** Open visitor sockets that time the frames of messages whose content starts with a marker. */
export interface VisitorSockets extends AsyncDisposable {
  /** Sockets open. */
  readonly open: number;
  /** Frames of marked messages received so far. */
  readonly received: number;
  /** Latencies of the marked messages created between `from` and `to` (wall-clock ms). */
  latency(from: number, to: number): SocketLatency;
  /** Waits until `count` marked frames arrived, or `timeoutMs` passed; resolves to the count. */
  waitFor(count: number, timeoutMs: number): Promise<number>;
}

/** Wall-clock milliseconds, with the sub-millisecond part. */
function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

/** `2026-11-22T01:27:40.123456Z` as milliseconds, microseconds kept. */
function parseTimestamp(ts: string): number {
  const micros = Number(/\.(\d{6})Z$/.exec(ts)?.[1] ?? "0");
  return Date.parse(ts.replace(/\.\d+Z$/, "Z")) + micros / 1000;
}

/**
 * Opens one socket per visitor token (`concurrency` handshakes at a time) on Parley at `port`,
 * timing the `message.created` frames of messages whose content starts with `marker`.
 */
export async function openVisitorSockets(
  port: number,
  tokens: string[],
  marker: string,
  concurrency = 50,
): Promise<VisitorSockets> {
  /** Per marked frame: when its message was created, and how long the frame took. */
  const createdAt: number[] = [];
  const took: number[] = [];
  const sockets: WebSocket[] = [];
  const waiters = new Set<() => void>();
  const onFrame = (event: MessageEvent) => {
    const arrived = nowMs();
    const frame = JSON.parse(event.data as string);
    if (frame.type !== "message.created" || !frame.message.content?.startsWith(marker)) return;
    const created = parseTimestamp(frame.message.created_at);
    createdAt.push(created);
    took.push(Math.max(0, arrived - created));
    for (const wake of waiters) wake();
  };
  const open = (token: string) =>
    new Promise<void>((resolve, reject) => {
      const socket = new WebSocket(`ws://127.0.0.1:${port}/api/v1/widget/socket?token=${token}`);
      socket.onopen = () => {
        sockets.push(socket);
        resolve();
      };
      socket.onerror = () => reject(new Error("A visitor socket did not open"));
      socket.onmessage = onFrame;
    });
  for (let i = 0; i < tokens.length; i += concurrency) {
    await Promise.all(tokens.slice(i, i + concurrency).map(open));
  }
  return {
    get open() {
      return sockets.filter((socket) => socket.readyState === WebSocket.OPEN).length;
    },
    get received() {
      return took.length;
    },
    latency(from, to) {
      const window = took.filter((_, i) => createdAt[i] >= from && createdAt[i] < to)
        .sort((a, b) => a - b);
      const at = (q: number) =>
        window[Math.min(window.length - 1, Math.floor(q * window.length))] ?? NaN;
      return {
        frames: window.length,
        p50Ms: at(0.5),
        p99Ms: at(0.99),
        maxMs: window[window.length - 1] ?? NaN,
      };
    },
    async waitFor(count, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (took.length < count && Date.now() < deadline) {
        await new Promise<void>((resolve) => {
          const wake = () => {
            waiters.delete(wake);
            clearTimeout(timer);
            resolve();
          };
          const timer = setTimeout(wake, Math.max(0, deadline - Date.now()));
          waiters.add(wake);
        });
      }
      return took.length;
    },
    async [Symbol.asyncDispose]() {
      await Promise.all(sockets.map((socket) =>
        new Promise<void>((resolve) => {
          if (socket.readyState === WebSocket.CLOSED) return resolve();
          socket.onclose = () => resolve();
          socket.close();
        })
      ));
    },
  };
}

/** The summary line of the socket scenarios. */
export function socketLine(
  sockets: number,
  runs: { name: string; sent: number; latency: SocketLatency }[],
  missing: number,
): string {
  const parts = runs.map(({ name, sent, latency }) =>
    `${name}: ${latency.frames} frames for ${sent} replies, p50 ${latency.p50Ms.toFixed(1)} ms, ` +
    `p99 ${latency.p99Ms.toFixed(1)} ms, max ${latency.maxMs.toFixed(0)} ms`
  );
  return `visitor sockets (${sockets} open, latency from the message's insert to its frame): ` +
    `${parts.join("; ")}; ${missing === 0 ? "no frame missing" : `${missing} frames missing`}`;
}
