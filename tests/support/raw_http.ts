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
