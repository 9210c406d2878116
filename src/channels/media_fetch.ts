/**
 * Fetching a media file for the proxies: the platform must answer within `headersMs`, and the
 * body may then take as long as it needs as long as it keeps coming — a wait for its next chunk
 * longer than `idleMs` ends it with an error (a reader that pauses is not waiting for it). A whole-request timeout would cut a large file on a slow link;
 * no timeout at all let a silent upstream hold the visitor's request (and the server's shutdown)
 * forever. The file is asked for unencoded (`accept-encoding: identity`); since the header is
 * set here, fetch leaves a body the platform encodes anyway as it came, so its
 * `content-encoding` and `content-length` still describe the bytes and pass on together.
 */

/** The time limits of {@linkcode fetchMedia}. */
export interface MediaFetchLimits {
  /** Longest wait for the response head. @default 15_000 */
  headersMs?: number;
  /** Longest wait for the body's next chunk. @default 30_000 */
  idleMs?: number;
  /**
   * Longest time the reader may leave a chunk waiting (a client that stopped reading), after
   * which the download ends: it holds a connection to the platform. @default 300_000
   */
  readerIdleMs?: number;
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
  const { headersMs = 15_000, idleMs = 30_000, readerIdleMs = 300_000 } = limits;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error("No answer in time")), headersMs);
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
  const reader = response.body.getReader();
  // The idle limit runs only while the body is waited for: a reader that takes its time is no
  // stall; one that stops reading for good meets the reader's limit. Either errors the stream
  // itself, then ends the upstream: an abort alone did not always end a body that was being read
  // (a large one, in Deno 2.9), and the download hung.
  let unread: ReturnType<typeof setTimeout> | undefined;
  const end = (stream: ReadableStreamDefaultController<Uint8Array>, error: Error) => {
    stream.error(error);
    controller.abort(error);
    reader.cancel(error).catch(() => {});
  };
  const watched = new ReadableStream<Uint8Array>({
    async pull(stream) {
      clearTimeout(unread);
      let stalled: ReturnType<typeof setTimeout> | undefined;
      const deadline = new Promise<never>((_, reject) => {
        stalled = setTimeout(() => reject(new Error("The download stalled")), idleMs);
      });
      try {
        const { done, value } = await Promise.race([reader.read(), deadline]);
        if (done) return stream.close();
        stream.enqueue(value);
        unread = setTimeout(
          () => end(stream, new Error("The reader stopped reading")),
          readerIdleMs,
        );
      } catch (error) {
        end(stream, error instanceof Error ? error : new Error(String(error)));
      } finally {
        clearTimeout(stalled);
      }
    },
    cancel(reason) {
      clearTimeout(unread);
      return reader.cancel(reason);
    },
  });
  return new Response(watched, { status: response.status, headers: response.headers });
}
