/** Requests written byte for byte, for what a client library would not send (a body never finished). */

/**
 * Writes `head` (and whatever follows it) to the server at `baseUrl`, reads what comes back first
 * and closes the connection: the start of the answer, given before the request was complete.
 */
export async function firstAnswer(baseUrl: string, head: string[]): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: Number(new URL(baseUrl).port) });
  try {
    await conn.write(new TextEncoder().encode(head.join("\r\n")));
    const buffer = new Uint8Array(4096);
    const read = await conn.read(buffer);
    return new TextDecoder().decode(buffer.subarray(0, read ?? 0));
  } finally {
    conn.close();
  }
}

/**
 * Writes `request` on a new connection to `port` (127.0.0.1) and reads the answer: until its
 * declared body has come, or the server closes the connection (the answer to a HEAD, a request
 * asking `Connection: close`).
 */
export async function exchange(port: number, request: string): Promise<string> {
  using conn = await Deno.connect({ port, hostname: "127.0.0.1" });
  await conn.write(new TextEncoder().encode(request));
  let text = "";
  const buffer = new Uint8Array(4096);
  for (;;) {
    const read = await conn.read(buffer);
    if (read === null) return text;
    text += new TextDecoder().decode(buffer.subarray(0, read));
    const [head, body] = text.split("\r\n\r\n", 2);
    const length = /content-length: (\d+)/i.exec(head)?.[1];
    if (body !== undefined && length !== undefined && body.length >= Number(length)) return text;
  }
}
