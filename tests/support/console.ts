/** Capturing what code under test prints as errors, so expected failures stay out of the output. */

/** Silences console.error for the duration of `body` and returns what it printed. */
export async function capturingErrors(body: () => Promise<void>): Promise<string[]> {
  const printed: string[] = [];
  const original = console.error;
  console.error = (...args: unknown[]) => void printed.push(args.map(String).join(" "));
  try {
    await body();
  } finally {
    console.error = original;
  }
  return printed;
}
