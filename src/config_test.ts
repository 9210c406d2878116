import assert from "node:assert/strict";
import { loadConfig } from "./config.ts";

Deno.test("loadConfig() applies the contract's defaults", () => {
  const config = loadConfig({});
  assert.equal(config.port, 8080);
  assert.equal(config.rateLimitPerMinute, 120);
  assert.equal(config.widgetRateLimitPerMinute, 600);
  assert.equal(config.databaseUrl, null);
  assert.equal(config.dataDir, "./.parley");
  assert.equal(config.publicBaseUrl, "http://localhost:8080");
  assert.equal(config.trustProxy, false);
});

Deno.test("loadConfig() reads whole numbers in decimal digits only", () => {
  assert.equal(loadConfig({ PORT: "0" }).port, 0);
  assert.equal(loadConfig({ PORT: "65535", WORKERS: "3" }).workers, 3);
  for (
    const [name, value] of [
      ["PORT", " "],
      ["PORT", "1e3"],
      ["PORT", "0x1F"],
      ["PORT", "-1"],
      ["PORT", "65536"],
      ["PORT", "80.5"],
      ["WORKERS", "0"],
      ["WORKERS", "1.5"],
      ["RATE_LIMIT_PER_MINUTE", "-1"],
      ["RATE_LIMIT_PER_MINUTE", " 5"],
      ["TRUST_PROXY", "yes"],
    ]
  ) {
    assert.throws(
      () => loadConfig({ [name]: value }),
      (error: Error) => error.message.startsWith(`Invalid configuration: ${name}`),
      `${name}=${JSON.stringify(value)}`,
    );
  }
});
