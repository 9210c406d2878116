/**
 * How the media proxies answer: the file streamed as it comes, but never as a page of Parley's
 * own origin — a customer's `.html` or `.svg` would otherwise run script as Parley. Raster
 * images show inline; everything else downloads; every answer is sandboxed.
 */

/** Types shown inline: raster images, audio and video, which cannot run script. */
const INLINE = /^(image\/(png|jpeg|gif|webp)|audio\/[a-z0-9.+-]+|video\/[a-z0-9.+-]+)$/;

/** Streams `body` with safe headers. */
export function mediaResponse(
  body: ReadableStream<Uint8Array> | null,
  contentType: string,
  contentLength: string | null,
): Response {
  const type = contentType.split(";")[0].trim().toLowerCase();
  const headers: Record<string, string> = {
    "content-type": contentType,
    "content-disposition": INLINE.test(type) ? "inline" : "attachment",
    "content-security-policy": "sandbox; default-src 'none'",
    "x-content-type-options": "nosniff",
    "cache-control": "private, max-age=300",
  };
  if (contentLength !== null) headers["content-length"] = contentLength;
  return new Response(body, { status: 200, headers });
}
