import assert from "node:assert/strict";
import { runCliProcess } from "./support/cli.ts";
import { createTestDatabase } from "./support/database.ts";
import { spawnServer, startTestServer } from "./support/server.ts";
import { commitBatch } from "../src/db/write_batch.ts";
import { parseCommandLine } from "../src/cli.ts";
import { verifyPassword } from "../src/crypto/password.ts";
import { createSecretBox } from "../src/crypto/secret_box.ts";
import { TEST_ENCRYPTION_KEY } from "./support/server.ts";
import { Buffer } from "node:buffer";

Deno.test("parseCommandLine reads --flag value and --flag=value", () => {
  assert.deepEqual(parseCommandLine(["chat:close", "--app", "1", "--id=2"]), {
    command: "chat:close",
    flags: { app: "1", id: "2" },
  });
  assert.throws(() => parseCommandLine(["app:create", "--name"]), /Flag --name needs a value/);
  assert.throws(() => parseCommandLine(["app:create", "stray"]), {
    message: "Unexpected argument before the first flag",
  });
});

Deno.test("parseCommandLine never repeats a stray argument, which may be half of a secret", () => {
  const args = ["user:create", "--app", "1", "--email", "a@b.c", "--password", "hunter2", "tail"];
  assert.throws(() => parseCommandLine(args), (error: Error) => {
    assert.equal(
      error.message,
      "Unexpected argument after the value of --password (quote a value containing spaces)",
    );
    assert.ok(!error.message.includes("tail") && !error.message.includes("hunter2"));
    return true;
  });
});

Deno.test("parseCommandLine refuses a flag given twice", () => {
  assert.throws(() => parseCommandLine(["app:create", "--name", "x", "--name", "y"]), {
    message: "Flag --name given twice",
  });
  assert.throws(() => parseCommandLine(["app:create", "--name=x", "--name", "y"]), {
    message: "Flag --name given twice",
  });
});

Deno.test("parseCommandLine refuses a flag the command does not take", () => {
  assert.throws(
    () => parseCommandLine(["user:create", "--app", "1", "--rol", "admin"]),
    {
      message:
        "Unknown flag --rol for user:create: expected --app, --email, --password, --password-file, --role",
    },
  );
  assert.throws(() => parseCommandLine(["key:list", "--app=1", "--id=2"]), /Unknown flag --id/);
  assert.throws(() => parseCommandLine(["nope"]), /Unknown command "nope"/);
  assert.throws(() => parseCommandLine([]), /Missing command/);
});

Deno.test("parseCommandLine takes a value starting with -- unless it names a flag", () => {
  assert.deepEqual(
    parseCommandLine(["user:create", "--password", "--s3cret--", "--email", "a@b.co"]).flags,
    { password: "--s3cret--", email: "a@b.co" },
  );
  assert.throws(
    () => parseCommandLine(["user:create", "--role", "--password", "x"]),
    /Flag --role needs a value/,
  );
  assert.throws(
    () => parseCommandLine(["user:create", "--role", "--email=a@b.co"]),
    /Flag --role needs a value/,
  );
});

Deno.test("cli slack:install-url links to where the running server is reached, unless its own PUBLIC_BASE_URL says", async () => {
  await using db = await createTestDatabase();
  const env = { DATABASE_URL: db.url, PARLEY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY };
  const app = JSON.parse((await runCliProcess(["app:create", "--name", "A"], env)).stdout);
  const args = ["slack:install-url", "--app", String(app.id)];
  const before = await runCliProcess(args, env);
  assert.equal(before.code, 0, before.stderr);
  assert.match(
    JSON.parse(before.stdout).url,
    /^http:\/\/localhost:8080\/api\/v1\/slack\/install\?ticket=[0-9a-f]{64}$/,
  );
  await using server = await startTestServer(db.url);
  const running = await runCliProcess(args, env);
  assert.equal(running.code, 0, running.stderr);
  assert.ok(
    JSON.parse(running.stdout).url.startsWith(
      `http://localhost:${server.parley.port}/api/v1/slack/install?ticket=`,
    ),
    running.stdout,
  );
  const own = await runCliProcess(args, { ...env, PUBLIC_BASE_URL: "https://chat.example.com/" });
  assert.ok(
    JSON.parse(own.stdout).url.startsWith("https://chat.example.com/api/v1/slack/install?ticket="),
  );
});

Deno.test("cli app:create and chat:close print JSON and exit 0", async () => {
  await using db = await createTestDatabase();
  const env = { DATABASE_URL: db.url };
  const created = await runCliProcess(["app:create", "--name", "Acme Inc"], env);
  assert.equal(created.code, 0, created.stderr);
  const app = JSON.parse(created.stdout);
  assert.equal(app.name, "Acme Inc");
  assert.match(app.public_id, /^app_[0-9a-f]{24}$/);
  assert.ok(Number.isInteger(app.id));

  const [visitor] = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "h", name: null, email: null },
  ]);
  const clientId = (visitor as { value: { client_id: number } }).value.client_id;
  const [sent] = await commitBatch(db.sql, [
    { kind: "visitor.message", appId: app.id, clientId, messageType: "text", content: "hi" },
  ]);
  const chatId = (sent as { value: { chat_id: number } }).value.chat_id;
  const closed = await runCliProcess([
    "chat:close",
    "--app",
    String(app.id),
    "--id",
    String(chatId),
  ], env);
  assert.equal(closed.code, 0, closed.stderr);
  const conversation = JSON.parse(closed.stdout);
  assert.equal(conversation.id, chatId);
  assert.equal(conversation.status, "closed");
  assert.equal(conversation.channel, "web");
  assert.equal(conversation.client_id, clientId);
  assert.match(conversation.created_at, /\.\d{6}Z$/);
});

Deno.test("cli user:create stores a dashboard login with its password hashed", async () => {
  await using db = await createTestDatabase();
  const env = { DATABASE_URL: db.url };
  const app = JSON.parse((await runCliProcess(["app:create", "--name", "A"], env)).stdout);
  const other = JSON.parse((await runCliProcess(["app:create", "--name", "B"], env)).stdout);
  const create = (appId: number, ...rest: string[]) =>
    runCliProcess(["user:create", "--app", String(appId), ...rest], env);

  const agent = await create(app.id, "--email", "Agent@Example.com", "--password", "s3cret-pass");
  assert.equal(agent.code, 0, agent.stderr);
  const printed = JSON.parse(agent.stdout);
  assert.deepEqual(Object.keys(printed).sort(), ["email", "id"]);
  assert.equal(printed.email, "Agent@Example.com");
  assert.ok(Number.isInteger(printed.id));
  const admin = await create(
    app.id,
    "--email",
    "boss@example.com",
    "--password",
    "another-pass",
    "--role",
    "admin",
  );
  assert.equal(admin.code, 0, admin.stderr);

  const rows = await db.sql<{ id: number; email: string; password_hash: string; role: string }[]>`
    SELECT id, email, password_hash, role FROM users WHERE app_id = ${app.id} ORDER BY id`;
  assert.deepEqual(rows.map((r) => [r.id, r.email, r.role]), [
    [printed.id, "Agent@Example.com", "agent"],
    [JSON.parse(admin.stdout).id, "boss@example.com", "admin"],
  ]);
  assert.ok(!rows[0].password_hash.includes("s3cret-pass"));
  assert.equal(await verifyPassword("s3cret-pass", rows[0].password_hash), true);
  assert.equal(await verifyPassword("another-pass", rows[0].password_hash), false);

  // The same email in another application is another user.
  const elsewhere = await create(
    other.id,
    "--email",
    "agent@example.com",
    "--password",
    "s3cret-pass",
  );
  assert.equal(elsewhere.code, 0, elsewhere.stderr);
  const accented = await create(
    app.id,
    "--email",
    "élodie@exämple.com",
    "--password",
    "--pass-word",
  );
  assert.equal(accented.code, 0, accented.stderr);

  const refusals: [string[], string][] = [
    [
      ["--email", "AGENT@example.com", "--password", "s3cret-pass"],
      `Application ${app.id} already has a user with email AGENT@example.com`,
    ],
    [
      ["--email", "ÉLODIE@EXÄMPLE.COM", "--password", "s3cret-pass"],
      `Application ${app.id} already has a user with email ÉLODIE@EXÄMPLE.COM`,
    ],
    [
      ["--email", "x@example.com", "--password", "s3cret-pass", "--rol", "admin"],
      "Unknown flag --rol for user:create: expected --app, --email, --password, --password-file, --role",
    ],
    [
      ["--email", "not-an-email", "--password", "s3cret-pass"],
      '"not-an-email" is not an email address',
    ],
    [
      ["--email", "x@example.com", "--password", "short"],
      "The password must have at least 8 characters",
    ],
    [
      ["--email", "x@example.com", "--password", "s3cret-pass", "--role", "owner"],
      "The role must be one of: admin, agent",
    ],
    [["--password", "s3cret-pass"], "Missing flag --email"],
    [["--email", "x@example.com"], "Missing flag --password"],
  ];
  for (const [args, message] of refusals) {
    const result = await create(app.id, ...args);
    assert.equal(result.code, 1, args.join(" "));
    assert.deepEqual(JSON.parse(result.stderr), { error: message });
  }
  const missingApp = await create(999999, "--email", "x@example.com", "--password", "s3cret-pass");
  assert.deepEqual(JSON.parse(missingApp.stderr), { error: "Application 999999 not found" });
  const [{ count }] = await db.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM users`;
  assert.equal(count, 4);
});

Deno.test("cli secrets may come from a file or standard input instead of the command line", async () => {
  await using db = await createTestDatabase();
  const env = { DATABASE_URL: db.url, PARLEY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY };
  const app = JSON.parse((await runCliProcess(["app:create", "--name", "A"], env)).stdout);
  const user = await runCliProcess(
    [
      "user:create",
      "--app",
      String(app.id),
      "--email",
      "a@example.com",
      "--password-file",
      "/dev/stdin",
    ],
    env,
    "piped pass phrase\n",
  );
  assert.equal(user.code, 0, user.stderr);
  const [{ password_hash }] = await db
    .sql`SELECT password_hash FROM users WHERE app_id = ${app.id}`;
  assert.equal(
    await verifyPassword("piped pass phrase", password_hash),
    true,
    "the line break is not part of it",
  );

  const dir = await Deno.makeTempDir();
  await Deno.writeTextFile(`${dir}/token`, "EAAG-from-file\r\n");
  await Deno.writeTextFile(`${dir}/secret`, "app-secret-from-file");
  const configure = (...rest: string[]) =>
    runCliProcess([
      "whatsapp:configure",
      "--app",
      String(app.id),
      "--phone-number-id",
      "1065",
      ...rest,
    ], env);
  const configured = await configure(
    "--access-token-file",
    `${dir}/token`,
    "--app-secret-file",
    `${dir}/secret`,
    "--verify-token",
    "inline-verify",
  );
  assert.equal(configured.code, 0, configured.stderr);
  assert.deepEqual(JSON.parse(configured.stdout), { app_id: app.id, phone_number_id: "1065" });
  const box = createSecretBox(new Uint8Array(Buffer.from(TEST_ENCRYPTION_KEY, "base64")));
  const [row] = await db.sql`
    SELECT access_token_sealed, app_secret_sealed, verify_token_sealed FROM whatsapp_channels
    WHERE app_id = ${app.id}`;
  assert.deepEqual(
    [row.access_token_sealed, row.app_secret_sealed, row.verify_token_sealed].map((s) =>
      box.open(s)
    ),
    ["EAAG-from-file", "app-secret-from-file", "inline-verify"],
  );

  const both = await configure(
    "--access-token",
    "x",
    "--access-token-file",
    `${dir}/token`,
    "--app-secret",
    "y",
    "--verify-token",
    "z",
  );
  assert.deepEqual([both.code, JSON.parse(both.stderr)], [1, {
    error: "Give --access-token or --access-token-file, not both",
  }]);
  const missing = await configure(
    "--access-token-file",
    `${dir}/nope`,
    "--app-secret",
    "y",
    "--verify-token",
    "z",
  );
  assert.equal(missing.code, 1);
  assert.match(
    JSON.parse(missing.stderr).error,
    new RegExp(`^Cannot read --access-token-file ${dir}/nope: `),
  );
  await Deno.writeTextFile(`${dir}/blank`, "\n");
  const blank = await configure(
    "--access-token-file",
    `${dir}/blank`,
    "--app-secret",
    "y",
    "--verify-token",
    "z",
  );
  assert.deepEqual(JSON.parse(blank.stderr), { error: "Flag --access-token must not be blank" });
  await Deno.remove(dir, { recursive: true });
});

Deno.test("cli errors are JSON on stderr with exit 1", async () => {
  await using db = await createTestDatabase();
  const env = { DATABASE_URL: db.url };
  const cases: [string[], string][] = [
    [
      ["nope"],
      'Unknown command "nope": expected one of app:create, key:create, key:list, key:revoke, chat:close, flow:set, flow:get, slack:install-url, whatsapp:configure, user:create',
    ],
    [["app:create"], "Missing flag --name"],
    [["chat:close", "--app", "x", "--id", "1"], "Flag --app must be a positive integer"],
    [["chat:close", "--app", "999999", "--id", "1"], "Application 999999 not found"],
    [
      ["key:list", "--app", "9007199254740993"],
      "Flag --app must be at most 9007199254740991",
    ],
    [
      ["key:list", "--app", "99999999999999999999"],
      "Flag --app must be at most 9007199254740991",
    ],
  ];
  for (const [args, message] of cases) {
    const result = await runCliProcess(args, env);
    assert.equal(result.code, 1, args.join(" "));
    assert.equal(result.stdout, "");
    assert.deepEqual(JSON.parse(result.stderr), { error: message });
  }
  const app = JSON.parse((await runCliProcess(["app:create", "--name", "A"], env)).stdout);
  const missing = await runCliProcess(
    ["chat:close", "--app", String(app.id), "--id", "424242"],
    env,
  );
  assert.deepEqual(JSON.parse(missing.stderr), { error: "Conversation not found" });
});

Deno.test("cli on the embedded default starts PostgreSQL, keeps data, and shares a running server's", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "parley-cli-" });
  try {
    const env = { DATA_DIR: dataDir };
    const first = await runCliProcess(["app:create", "--name", "One"], env);
    assert.equal(first.code, 0, first.stderr);
    const second = await runCliProcess(["app:create", "--name", "Two"], env);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(JSON.parse(second.stdout).id, JSON.parse(first.stdout).id + 1);

    const server = await spawnServer({ DATA_DIR: dataDir });
    try {
      const third = await runCliProcess(["app:create", "--name", "Three"], env);
      assert.equal(third.code, 0, third.stderr);
      assert.equal(JSON.parse(third.stdout).id, JSON.parse(second.stdout).id + 1);
      // The server's PostgreSQL survived the CLI: the server still answers readyz.
      const ready = await fetch(`${server.baseUrl}/readyz`);
      assert.equal(ready.status, 200);
      await ready.body?.cancel();
    } finally {
      const status = await server.stop();
      assert.equal(status.code, 0);
    }
    // Stopped with the server: nothing listens on its port any more.
    const pid = await Deno.readTextFile(`${dataDir}/pg/postmaster.pid`).catch(() => null);
    assert.equal(pid, null);
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});
