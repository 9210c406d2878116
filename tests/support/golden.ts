/**
 * Golden-file assertions: a value is compared with the JSON stored in a file beside the test.
 * Run the tests with `UPDATE_GOLDEN=1` to (re)write the files from what the code produces now,
 * then read the diff before committing it: the files are the reviewed expectation.
 */
import assert from "node:assert/strict";

/** Whether this run rewrites golden files instead of comparing with them. */
const UPDATING = Deno.env.get("UPDATE_GOLDEN") === "1";

/**
 * Asserts that `actual`, as JSON, equals the content of the golden file at `url` (resolve it
 * with `new URL("testdata/x.json", import.meta.url)`). With `UPDATE_GOLDEN=1` the file is
 * written instead.
 */
export async function assertGolden(url: URL, actual: unknown): Promise<void> {
  const text = `${JSON.stringify(actual, null, 2)}\n`;
  if (UPDATING) {
    await Deno.mkdir(new URL(".", url), { recursive: true });
    await Deno.writeTextFile(url, text);
    return;
  }
  let expected: string;
  try {
    expected = await Deno.readTextFile(url);
  } catch (error) {
    assert.fail(`Golden file ${url.pathname} is missing (run with UPDATE_GOLDEN=1): ${error}`);
  }
  assert.deepStrictEqual(JSON.parse(text), JSON.parse(expected), `Differs from ${url.pathname}`);
}
