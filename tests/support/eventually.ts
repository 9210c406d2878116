/**
 * Polling for what happens after an answer: a WhatsApp delivery or a Slack event is applied
 * after its 200, a send leaves from the outbox. Tests read the database until it shows the
 * outcome, and fail with a name for what never came.
 */

/** Reads `read()` until `accept` holds for what it returned; returns that. */
export async function eventually<T>(
  read: () => Promise<T>,
  accept: (value: T) => boolean,
  what: string,
  timeoutMs = 5_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (accept(value)) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
