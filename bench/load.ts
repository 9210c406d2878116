/**
 * An HTTP/1.1 load generator on raw keep-alive TCP connections, for a fixed time after a
 * warm-up. Closed loop by default: `connections` loops, each sending its next request as soon
 * as the previous answered — the server's saturation throughput, where latency is mostly the
 * queue those loops keep full. Open loop with `ratePerSecond`: requests are due at a fixed rate
 * and the connections take them in turn, each request's latency counted from when it was due
 * (so a stalled server is charged for the requests it kept waiting, not only for the ones it
 * answered) — the latency at a given load. It speaks just enough HTTP (Content-Length bodies)
 * to stay cheap, so that on a small machine the CPU goes to the server under test, not to the
 * client. Bounded in time and count; targets loopback only.
 */

/** One request to make; `index` counts requests of the whole run. */
export interface LoadRequest {
  method: "GET" | "POST";
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/** Options of {@linkcode runLoad}. */
export interface LoadOptions {
  /** Port on 127.0.0.1. */
  port: number;
  /** Concurrent loops, one keep-alive connection each. @default 64 */
  connections?: number;
  /** Measured time in ms. @default 10_000 */
  durationMs?: number;
  /** Unmeasured warm-up in ms. @default 2_000 */
  warmupMs?: number;
  /** Hard cap on requests, whatever the time. @default 2_000_000 */
  maxRequests?: number;
  /** Requests due per second (open loop); absent, each connection sends as fast as answered. */
  ratePerSecond?: number;
}

/** What a run measured. */
export interface LoadResult {
  /** Requests answered in the measured time. */
  requests: number;
  /** Requests answered in all, warm-up included. */
  completed: number;
  errors: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function encode(request: LoadRequest): Uint8Array {
  const body = request.body ?? "";
  const headers = {
    host: "127.0.0.1",
    ...(request.headers ?? {}),
    ...(request.body !== undefined
      ? { "content-length": String(encoder.encode(body).length) }
      : {}),
  };
  const head = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
  return encoder.encode(`${request.method} ${request.path} HTTP/1.1\r\n${head}\r\n${body}`);
}

/** Where the blank line ending a response head starts in `bytes`, or -1. */
function headEnd(bytes: Uint8Array): number {
  for (let i = 0; i + 3 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 && bytes[i + 3] === 10) {
      return i;
    }
  }
  return -1;
}

/** A connection's read state: bytes received and not yet consumed, and one read buffer. */
interface ReadState {
  buffer: Uint8Array<ArrayBuffer>;
  chunk: Uint8Array<ArrayBuffer>;
}

/**
 * Reads one response from `conn`; returns its status. Works on bytes: only the head is decoded,
 * and the read buffer is the connection's, so that the generator's own CPU (which shares the
 * machine with the server) stays small and steady.
 */
async function readResponse(conn: Deno.Conn, state: ReadState): Promise<number> {
  for (;;) {
    const end = headEnd(state.buffer);
    if (end >= 0) {
      const head = decoder.decode(state.buffer.subarray(0, end));
      const status = Number(head.slice(9, 12));
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      const total = end + 4 + length;
      if (state.buffer.length >= total) {
        state.buffer = state.buffer.slice(total);
        return status;
      }
    }
    const n = await conn.read(state.chunk);
    if (n === null) throw new Error("Connection closed");
    const merged = new Uint8Array(state.buffer.length + n);
    merged.set(state.buffer);
    merged.set(state.chunk.subarray(0, n), state.buffer.length);
    state.buffer = merged;
  }
}

/** Runs the load; a non-2xx answer counts as an error. */
export async function runLoad(
  make: (index: number) => LoadRequest,
  options: LoadOptions,
): Promise<LoadResult> {
  const connections = options.connections ?? 64;
  const durationMs = options.durationMs ?? 10_000;
  const warmupMs = options.warmupMs ?? 2_000;
  const maxRequests = options.maxRequests ?? 2_000_000;
  const started = performance.now();
  const measureFrom = started + warmupMs;
  const end = measureFrom + durationMs;
  const latencies: number[] = [];
  let errors = 0;
  let index = 0;
  let completed = 0;
  const rate = options.ratePerSecond;
  /** When request `i` is due: at once in a closed loop, on the schedule in an open one. */
  const dueAt = (i: number) => rate === undefined ? performance.now() : started + i * 1000 / rate;
  async function loop() {
    let conn: Deno.Conn | null = null;
    const state: ReadState = { buffer: new Uint8Array(0), chunk: new Uint8Array(65536) };
    try {
      while (index < maxRequests) {
        const i = index++;
        const due = dueAt(i);
        if (due >= end || (rate === undefined && performance.now() >= end)) break;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        conn ??= await Deno.connect({ hostname: "127.0.0.1", port: options.port });
        const bytes = encode(make(i));
        const t0 = rate === undefined ? performance.now() : due;
        let ok = false;
        try {
          await conn.write(bytes);
          const status = await readResponse(conn, state);
          ok = status >= 200 && status < 300;
        } catch {
          conn.close();
          conn = null;
          state.buffer = new Uint8Array(0);
        }
        const t1 = performance.now();
        completed++;
        // Open loop: every request due in the window counts, however late it was answered.
        if (t0 >= measureFrom && (rate !== undefined || t1 <= end)) {
          latencies.push(t1 - t0);
          if (!ok) errors++;
        }
      }
    } finally {
      conn?.close();
    }
  }
  await Promise.all(Array.from({ length: connections }, loop));
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return {
    requests: latencies.length,
    completed,
    errors,
    rps: latencies.length / (durationMs / 1000),
    p50Ms: at(0.5),
    p99Ms: at(0.99),
  };
}
