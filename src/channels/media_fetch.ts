/**
 * Fetching a media file for the proxies: the platform must answer within `headersMs`, and the
 * body may then take as long as it needs as long as it keeps coming — a pause longer than
 * `idleMs` ends it with an error. A whole-request timeout would cut a large file on a slow link;
 * no timeout at all let a silent upstream hold the visitor's request (and the server's shutdown)
 * forever. The file is asked for unencoded (`accept-encoding: identity`); since the header is
 * set here, fetch leaves a body the platform encodes anyway as it came, so its
 * `content-encoding` and `content-length` still describe the bytes and pass on together.
 */

/** The time limits of {@linkcode fetchMedia}. */
export interface MediaFetchLimits {
  /** Longest wait for the response head. @default 15_000 */
  headersMs?: number;
  /** Longest pause between two chunks of the body. @default 30_000 */
  idleMs?: number;
}

/**
 * `fetch(url, init)` under the limits; rejects as fetch does when the head is late, and the
 * returned body errors when it stalls. Redirects are never followed (tokens stay on the host
 * that was checked).
 */
export async function fetchMedia(
  url: string,
  init: { headers: Record<string, string> },
  limits: MediaFetchLimits = {},
): Promise<Response> {
  const { headersMs = 15_000, idleMs = 30_000 } = limits;
  const controller = new AbortController();
  let timer = setTimeout(() => controller.abort(new Error("No answer in time")), headersMs);
  let response: Response;
  try {
    response = await fetch(url, {
      headers: { ...init.headers, "accept-encoding": "identity" },
      redirect: "error",
      signal: controller.signal,
    });
  } finally {
    clearTimeout(timer);
  }
  if (!response.body) return response;
  const stall = () => controller.abort(new Error("The download stalled"));
  timer = setTimeout(stall, idleMs);
  const watched = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, stream) {
        clearTimeout(timer);
        timer = setTimeout(stall, idleMs);
        stream.enqueue(chunk);
      },
      flush() {
        clearTimeout(timer);
      },
      cancel() {
        clearTimeout(timer);
      },
    }),
  );
  return new Response(watched, { status: response.status, headers: response.headers });
}
