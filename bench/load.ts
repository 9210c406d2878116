/**
 * A closed-loop load generator: `connections` concurrent loops, each sending its next request
 * as soon as the previous answered, for a fixed time after a warm-up. Reports throughput and
 * latency percentiles. Bounded in time and count; targets loopback only.
 */

/** One request to make; `index` counts requests of the whole run. */
export type MakeRequest = (index: number) => Request;

/** Options of {@linkcode runLoad}. */
export interface LoadOptions {
  /** Concurrent loops (each keeps one connection busy). @default 64 */
  connections?: number;
  /** Measured time in ms. @default 10_000 */
  durationMs?: number;
  /** Unmeasured warm-up in ms. @default 2_000 */
  warmupMs?: number;
  /** Hard cap on requests, whatever the time. @default 2_000_000 */
  maxRequests?: number;
}

/** What a run measured. */
export interface LoadResult {
  requests: number;
  errors: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

/** Runs the load; a non-2xx answer counts as an error. */
export async function runLoad(make: MakeRequest, options: LoadOptions = {}): Promise<LoadResult> {
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
  async function loop() {
    while (index < maxRequests) {
      const now = performance.now();
      if (now >= end) return;
      const request = make(index++);
      const t0 = performance.now();
      let ok = false;
      try {
        const res = await fetch(request);
        await res.arrayBuffer();
        ok = res.ok;
      } catch {
        ok = false;
      }
      const t1 = performance.now();
      if (t0 >= measureFrom && t1 <= end) {
        latencies.push(t1 - t0);
        if (!ok) errors++;
      }
    }
  }
  await Promise.all(Array.from({ length: connections }, loop));
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return {
    requests: latencies.length,
    errors,
    rps: latencies.length / (durationMs / 1000),
    p50Ms: at(0.5),
    p99Ms: at(0.99),
  };
}
