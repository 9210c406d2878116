import assert from "node:assert/strict";

/** What `src/domain` may import (STYLE.md: pure rules, no I/O): itself and zod. */
function isAllowed(specifier: string): boolean {
  return specifier === "zod" || (specifier.startsWith("./") && !specifier.includes("/../"));
}

Deno.test("src/domain imports nothing but its own modules and zod", async () => {
  const offending: string[] = [];
  let scanned = 0;
  for await (const entry of Deno.readDir(new URL("../src/domain/", import.meta.url))) {
    if (!entry.isFile || !entry.name.endsWith(".ts") || entry.name.endsWith("_test.ts")) continue;
    scanned++;
    const source = await Deno.readTextFile(new URL(`../src/domain/${entry.name}`, import.meta.url));
    const specifiers = [
      ...source.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+"([^"]+)"/gms),
      ...source.matchAll(/\bimport\(\s*"([^"]+)"\s*\)/g),
    ].map((match) => match[1]);
    for (const specifier of specifiers) {
      if (!isAllowed(specifier)) offending.push(`${entry.name}: ${specifier}`);
    }
  }
  assert.ok(scanned > 10, `scanned ${scanned} modules`);
  assert.deepEqual(offending, []);
});
