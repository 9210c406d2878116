import assert from "node:assert/strict";
import { mediaResponse, mediaType } from "./media_response.ts";

Deno.test("mediaType keeps one bare type/subtype and nothing else", () => {
  assert.equal(mediaType("image/PNG"), "image/png");
  assert.equal(mediaType("text/plain; charset=utf-8"), "text/plain");
  assert.equal(mediaType("image/png;,text/html"), "application/octet-stream");
  assert.equal(mediaType("image/png, text/html"), "application/octet-stream");
  assert.equal(mediaType(""), "application/octet-stream");
  assert.equal(mediaType("text/html\u0000"), "application/octet-stream");
});

Deno.test("mediaResponse shows raster images inline and makes everything else a download", () => {
  const headersOf = (type: string) => mediaResponse(null, type, "3").headers;
  const png = headersOf("image/png");
  assert.equal(png.get("content-disposition"), "inline");
  assert.equal(png.get("content-type"), "image/png");
  assert.equal(png.get("content-length"), "3");
  assert.equal(png.get("x-content-type-options"), "nosniff");
  assert.equal(png.get("content-security-policy"), "sandbox; default-src 'none'");
  const listed = headersOf("image/png;,text/html");
  assert.equal(listed.get("content-disposition"), "attachment");
  assert.equal(listed.get("content-type"), "application/octet-stream");
  for (const type of ["text/html; charset=utf-8", "image/svg+xml", "application/pdf"]) {
    assert.equal(headersOf(type).get("content-disposition"), "attachment", type);
  }
});
