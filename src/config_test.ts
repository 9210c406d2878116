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
  assert.equal(loadConfig({ WEBHOOK_WORKERS: "64" }).webhookWorkers, 64);
  assert.ok(loadConfig({}).workers <= 64);
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
      ["WORKERS", "65"],
      ["WEBHOOK_WORKERS", "100000"],
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

Deno.test("loadConfig() refuses URLs of the wrong scheme, and a base URL with a query or fragment", () => {
  const refused: [string, string, string][] = [
    ["PUBLIC_BASE_URL", "parley.example.com:8080", "must be an absolute https:// or http:// URL"],
    ["PUBLIC_BASE_URL", "javascript:alert(1)", "must be an absolute https:// or http:// URL"],
    ["PUBLIC_BASE_URL", "ftp://files.example", "must be an absolute https:// or http:// URL"],
    ["PUBLIC_BASE_URL", "http:/parley.example", "must be an absolute https:// or http:// URL"],
    ["PUBLIC_BASE_URL", "https://x.example/?q=1", "must have no query, fragment or user name"],
    ["PUBLIC_BASE_URL", "https://x.example/#top", "must have no query, fragment or user name"],
    ["PUBLIC_BASE_URL", "https://x.example/?", "must have no query, fragment or user name"],
    ["PUBLIC_BASE_URL", "https://u:p@x.example", "must have no query, fragment or user name"],
    ["SLACK_API_URL", "ftp:/x", "must be an absolute https:// or http:// URL"],
    // Not URLs at all: the base URL's own check must not throw past the variable's name.
    ["PUBLIC_BASE_URL", "not a url", "must be an absolute https:// or http:// URL"],
    ["PUBLIC_BASE_URL", "http://", "must be an absolute https:// or http:// URL"],
    ["WHATSAPP_GRAPH_URL", "not a url", "must be an absolute https:// or http:// URL"],
    ["SLACK_API_URL", "http://", "must be an absolute https:// or http:// URL"],
    ["WHATSAPP_GRAPH_URL", "graph.example:443", "must be an absolute https:// or http:// URL"],
    ["SLACK_AUTHORIZE_URL", "slack.com/oauth", "must be an absolute https:// or http:// URL"],
    ["DATABASE_URL", "http://db.example/x", "must be an absolute postgres:// or postgresql:// URL"],
    ["DATABASE_URL", "db.example:5432", "must be an absolute postgres:// or postgresql:// URL"],
  ];
  for (const [name, value, message] of refused) {
    assert.throws(
      () => loadConfig({ [name]: value }),
      { message: `Invalid configuration: ${name}: ${message}` },
      `${name}=${value}`,
    );
  }
  assert.equal(
    loadConfig({ PUBLIC_BASE_URL: "https://x.example/parley/" }).publicBaseUrl,
    "https://x.example/parley",
  );
  for (
    const url of [
      "postgres://u:p@127.0.0.1:5432/db",
      "postgresql://localhost/db",
      "postgresql:///db?host=/run/postgresql",
      "postgres:///parley",
    ]
  ) {
    assert.equal(loadConfig({ DATABASE_URL: url }).databaseUrl, url);
  }
  assert.equal(
    loadConfig({ SLACK_AUTHORIZE_URL: "https://slack.example/authorize?team=T1" }).slack
      .authorizeUrl,
    "https://slack.example/authorize?team=T1",
  );
});
