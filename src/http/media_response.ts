/**
 * How the media proxies answer: the file streamed as it comes, but never as a page of Parley's
 * own origin — a customer's `.html` or `.svg` would otherwise run script as Parley. Raster
 * images show inline; everything else downloads; every answer is sandboxed.
 */

/** Types shown inline: raster images, audio and video, which cannot run script. */
const INLINE = /^(image\/(png|jpeg|gif|webp)|audio\/[a-z0-9.+-]+|video\/[a-z0-9.+-]+)$/;

/**
 * The bare media type of a Content-Type header, lowercase; `application/octet-stream` for
 * anything but one `type/subtype` (a browser reads a list such as `image/png;,text/html` by its
 * last entry, so the header is never passed on as it came).
 */
export function mediaType(contentType: string): string {
  const type = contentType.split(";")[0].trim().toLowerCase();
  return /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/.test(type) &&
      !contentType.includes(",")
    ? type
    : "application/octet-stream";
}

/** Streams `body` with safe headers (`contentLength` and `contentEncoding` describe it as is). */
export function mediaResponse(
  body: ReadableStream<Uint8Array> | null,
  contentType: string,
  contentLength: string | null,
  contentEncoding: string | null = null,
): Response {
  const type = mediaType(contentType);
  const headers: Record<string, string> = {
    "content-type": type,
    "content-disposition": INLINE.test(type) ? "inline" : "attachment",
    "content-security-policy": "sandbox; default-src 'none'",
    "x-content-type-options": "nosniff",
    "cache-control": "private, max-age=300",
  };
  if (contentLength !== null) headers["content-length"] = contentLength;
  // The bytes as the platform sent them: the length counts them encoded.
  if (contentEncoding !== null) headers["content-encoding"] = contentEncoding;
  return new Response(body, { status: 200, headers });
}
