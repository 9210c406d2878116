import assert from "node:assert/strict";
import { mediaResponse } from "./media_response.ts";

Deno.test("mediaResponse shows raster images inline and makes every other type a download", () => {
  const inline = mediaResponse(null, "image/png", "12");
  assert.equal(inline.headers.get("content-disposition"), "inline");
  assert.equal(inline.headers.get("content-length"), "12");
  for (const type of ["text/html; charset=utf-8", "image/svg+xml", "application/pdf"]) {
    const response = mediaResponse(null, type, null);
    assert.equal(response.headers.get("content-disposition"), "attachment", type);
    assert.equal(response.headers.get("content-security-policy"), "sandbox; default-src 'none'");
    assert.equal(response.headers.get("x-content-type-options"), "nosniff");
  }
});
