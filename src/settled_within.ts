/** A promise with a deadline: the one way Parley stops waiting for something that may never answer. */

/**
 * `promise`, or a rejection with `late()` once `timeoutMs` passed first. The promise itself goes
 * on; a rejection of it after the deadline is handled here (nobody is left to hear it).
 */
export async function settledWithin<T>(
  promise: Promise<T>,
  timeoutMs: number,
  late: () => Error,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), timeoutMs);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
