import assert from "node:assert/strict";
import { readSummary, runTestFile, runTestFiles, splitArguments } from "./file_runner.ts";

Deno.test("readSummary reads deno's closing line, passed and failed", () => {
  assert.deepEqual(readSummary("x ... ok\n\nok | 12 passed (3 steps) | 0 failed (2s)\n"), {
    passed: 12,
    failed: 0,
  });
  assert.deepEqual(
    readSummary("\x1b[31mFAILED\x1b[0m | 3 passed | 1 failed \x1b[38;5;245m(9s)\x1b[0m\n"),
    { passed: 3, failed: 1 },
  );
  assert.equal(readSummary("error: Module not found\n"), null);
});

Deno.test("splitArguments keeps flags and their values apart from the files", async () => {
  const split = await splitArguments(["--filter", "tests/x_test.ts", "tests/y_test.ts", "--quiet"]);
  assert.deepEqual(split, {
    files: ["tests/y_test.ts"],
    flags: ["--filter", "tests/x_test.ts", "--quiet"],
  });
  const dir = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${dir}/nested`);
    await Deno.writeTextFile(`${dir}/nested/b_test.ts`, "");
    await Deno.writeTextFile(`${dir}/a_test.ts`, "");
    await Deno.writeTextFile(`${dir}/helper.ts`, "");
    assert.deepEqual((await splitArguments([`${dir}/`])).files, [
      `${dir}/a_test.ts`,
      `${dir}/nested/b_test.ts`,
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("runTestFile counts a file's passes and failures, and kills one that goes silent", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const mixed = `${dir}/mixed_test.ts`;
    await Deno.writeTextFile(
      mixed,
      `Deno.test("passes", () => {});\nDeno.test("fails", () => { throw new Error("no"); });\n`,
    );
    const hung = `${dir}/hung_test.ts`;
    await Deno.writeTextFile(
      hung,
      `Deno.test("waits forever", () => new Promise(() => setInterval(() => {}, 1000)));\n`,
    );
    const options = { flags: [], env: {}, watchdog: { silenceMs: 1_500, totalMs: 60_000 } };

    const counted = await runTestFile(mixed, options);
    assert.equal(counted.passed, 1);
    assert.equal(counted.failed, 1);
    assert.equal(counted.success, false);
    assert.equal(counted.killed, null);
    assert.match(counted.output, /fails => .*\n.*error: Error: no/s);

    const killed = await runTestFile(hung, options);
    assert.equal(killed.killed, "printed nothing for 2 s");
    assert.equal(killed.success, false);
    assert.equal(killed.failed, 1);
    assert.match(killed.output, /waits forever \.\.\./);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("runTestFiles runs a killed file once more and says it hung before", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const marker = `${dir}/ran_once`;
    const flaky = `${dir}/flaky_test.ts`;
    await Deno.writeTextFile(
      flaky,
      `Deno.test("hangs the first time only", async () => {
        const first = await Deno.stat(${JSON.stringify(marker)}).then(() => false, () => true);
        if (first) {
          await Deno.writeTextFile(${JSON.stringify(marker)}, "");
          await new Promise(() => setInterval(() => {}, 1000));
        }
      });\n`,
    );
    const heard: string[] = [];
    const options = { flags: [], env: {}, watchdog: { silenceMs: 1_500, totalMs: 60_000 } };
    const [outcome] = await runTestFiles([flaky], 2, options, (done) => heard.push(done.file));
    assert.deepEqual(heard, [flaky]);
    assert.equal(outcome.killedBefore, "printed nothing for 2 s");
    assert.equal(outcome.killed, null);
    assert.equal(outcome.success, true);
    assert.equal(outcome.passed, 1);
    assert.equal(outcome.failed, 0);
    assert.match(outcome.output, /KILLED: printed nothing for 2 s; running it again/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
