/**
 * The OpenAPI document of `/openapi/v1` checked against what the routes really answer: real
 * requests against a real server, each answer's status looked up in the document, its JSON
 * body validated with Ajv against the schema declared for that path, method and status, and
 * its declared rate-limit headers looked for in the real response.
 */
import assert from "node:assert/strict";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { createTestDatabase } from "./support/database.ts";
import { startTestServer } from "./support/server.ts";
import { type ApiAnswer, apiCall, createKeyedApp, createVisitorChat } from "./support/open_api.ts";
import type { Sql } from "../src/db/client.ts";
import { commitBatch } from "../src/db/write_batch.ts";
import { MAX_BODY_BYTES } from "../src/http/middleware/body_size_limit.ts";

type JsonObject = Record<string, unknown>;

interface MediaType {
  schema: JsonObject;
}

interface ResponseDoc {
  headers?: Record<string, JsonObject>;
  content?: Record<string, MediaType>;
}

interface Operation {
  security?: unknown[];
  requestBody?: { content: Record<string, MediaType> };
  responses: Record<string, ResponseDoc>;
  "x-parley-extension"?: true;
}

interface OpenApiDocument {
  openapi: string;
  servers: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, JsonObject> } & JsonObject;
}

const RATE_LIMIT_HEADERS = [
  "X-RateLimit-Limit",
  "X-RateLimit-Remaining",
  "X-RateLimit-Reset",
  "RateLimit-Policy",
  "RateLimit",
];

const PUBLIC_BASE_URL = "https://parley.example.com";

/** The document's `date-time` format (Ajv knows no formats of its own). */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/i;

const ajv = new Ajv2020({ strict: false, allErrors: true, formats: { "date-time": DATE_TIME } });
const validators = new WeakMap<JsonObject, ValidateFunction>();

/** Fetches the served document (no key). */
async function loadDocument(baseUrl: string): Promise<OpenApiDocument> {
  const answer = await apiCall(baseUrl, "/openapi.json");
  assert.equal(answer.status, 200, JSON.stringify(answer.json));
  return answer.json;
}

/** The operation the document declares for `method` on the template `path`. */
function operationOf(doc: OpenApiDocument, method: string, path: string): Operation {
  const operation = doc.paths[path]?.[method.toLowerCase()];
  assert.ok(operation, `the document declares no operation ${method} ${path}`);
  return operation;
}

/** What the JSON pointer of a local `$ref` (`#/...`) names in the document, or undefined. */
function pointerTarget(doc: OpenApiDocument, ref: string): unknown {
  if (!ref.startsWith("#/")) return undefined;
  let node: unknown = doc;
  for (const raw of ref.slice(2).split("/")) {
    const key = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    if (node === null || typeof node !== "object" || !Object.hasOwn(node, key)) return undefined;
    node = (node as JsonObject)[key];
  }
  return node;
}

/**
 * Follows `ref` (and the `$ref`s of schemas that are nothing but a reference) to a definition
 * with content of its own; fails when a reference names nothing or the chain comes back on
 * itself.
 */
function resolveRef(doc: OpenApiDocument, ref: string): JsonObject {
  const seen: string[] = [];
  let current = ref;
  for (;;) {
    assert.ok(!seen.includes(current), `$ref cycle with no definition: ${[...seen, current]}`);
    seen.push(current);
    const target = pointerTarget(doc, current);
    assert.ok(
      target !== null && typeof target === "object" && !Array.isArray(target),
      `$ref ${current} names nothing in the document`,
    );
    const { $ref, ...rest } = target as JsonObject;
    if (typeof $ref !== "string" || Object.keys(rest).length > 0) return target as JsonObject;
    current = $ref;
  }
}

/** Every `$ref` value anywhere under `node`. */
function refsIn(node: unknown): string[] {
  if (Array.isArray(node)) return node.flatMap(refsIn);
  if (node === null || typeof node !== "object") return [];
  return Object.entries(node).flatMap(([key, value]) =>
    key === "$ref" && typeof value === "string" ? [value] : refsIn(value)
  );
}

/** Ajv's validator of a schema of the document, its `#/components/...` refs resolvable. */
function validatorOf(doc: OpenApiDocument, schema: JsonObject, what: string): ValidateFunction {
  let validate = validators.get(schema);
  if (!validate) {
    try {
      validate = ajv.compile({ ...schema, components: doc.components });
    } catch (error) {
      assert.fail(`${what}: the documented schema does not compile: ${error}`);
    }
    validators.set(schema, validate);
  }
  return validate;
}

/** Asserts that `value` validates against `schema` of the document. */
function assertValid(doc: OpenApiDocument, schema: JsonObject, value: unknown, what: string) {
  const validate = validatorOf(doc, schema, what);
  assert.ok(
    validate(value),
    `${what}: ${ajv.errorsText(validate.errors)} in ${JSON.stringify(value).slice(0, 500)}`,
  );
}

/** Whether `value` validates against `schema` of the document. */
function isValid(doc: OpenApiDocument, schema: JsonObject, value: unknown): boolean {
  return validatorOf(doc, schema, JSON.stringify(value))(value) as boolean;
}

/**
 * Checks a real answer against the document: its status is declared for the operation, its
 * content type too, its body validates against the declared schema, the declared rate-limit
 * headers are really sent, and 401/429 carry (and declare) WWW-Authenticate/Retry-After.
 */
function validateAnswer(
  doc: OpenApiDocument,
  method: string,
  templatePath: string,
  answer: ApiAnswer,
): void {
  const operation = operationOf(doc, method, templatePath);
  const where = `${method} ${templatePath} → ${answer.status}`;
  const response = operation.responses[String(answer.status)];
  assert.ok(
    response,
    `${where}: status not declared (declared: ${Object.keys(operation.responses).join(", ")})`,
  );
  const contentType = answer.headers.get("content-type") ?? "";
  const mediaType = contentType.split(";")[0].trim();
  const content = response.content?.[mediaType];
  assert.ok(content, `${where}: content type ${contentType} not declared`);
  assertValid(doc, content.schema, answer.json, where);

  const declared = Object.keys(response.headers ?? {});
  const isPublic = Array.isArray(operation.security) && operation.security.length === 0;
  if (!isPublic) {
    for (const name of RATE_LIMIT_HEADERS) {
      assert.ok(declared.includes(name), `${where}: rate-limit header ${name} not declared`);
    }
  }
  for (const name of declared.filter((name) => RATE_LIMIT_HEADERS.includes(name))) {
    assert.ok(answer.headers.has(name), `${where}: declared header ${name} is missing`);
  }
  if (answer.status === 401) {
    assert.ok(declared.includes("WWW-Authenticate"), `${where}: WWW-Authenticate not declared`);
    assert.equal(answer.headers.get("www-authenticate"), 'Bearer realm="parley"', where);
  }
  if (answer.status === 429) {
    assert.ok(declared.includes("Retry-After"), `${where}: Retry-After not declared`);
    assert.match(answer.headers.get("retry-after") ?? "", /^[1-9][0-9]*$/, where);
  }
  if (answer.headers.has("link")) {
    assert.ok(declared.includes("Link"), `${where}: a Link header is sent but not declared`);
  }
}

/** Checks an answer that no operation describes (unknown route, wrong method) against `Error`. */
function validateErrorAnswer(doc: OpenApiDocument, answer: ApiAnswer, status: number): void {
  assert.equal(answer.status, status, JSON.stringify(answer.json));
  const schema = doc.components.schemas.Error;
  assert.ok(schema, "the document has no components.schemas.Error");
  assertValid(doc, schema, answer.json, `Error answer ${status}`);
}

/** Waits past the minute's end when it is near, so that a rate-limit window holds a test. */
async function awayFromWindowEdge(sql: Sql): Promise<void> {
  const [row] = await sql`SELECT extract(second FROM clock_timestamp())::float AS s`;
  if (row.s > 50) await new Promise((resolve) => setTimeout(resolve, (61 - row.s) * 1000));
}

Deno.test("GET /openapi.json serves an OpenAPI 3.1 document without a key, with every Open API path", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, { PUBLIC_BASE_URL });
  const res = await fetch(`${server.baseUrl}/openapi/v1/openapi.json`);
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.equal(res.headers.get("content-type"), "application/json; charset=utf-8");
  const doc = JSON.parse(text) as OpenApiDocument;
  assert.equal(doc.openapi, "3.1.0");
  const methods = Object.fromEntries(
    Object.entries(doc.paths).map(([path, item]) => [path, Object.keys(item).sort()]),
  );
  assert.deepEqual(methods, {
    "/conversations": ["get"],
    "/conversations/{id}": ["get"],
    "/conversations/{id}/messages": ["get"],
    "/flow": ["delete", "get", "put"],
    "/messages": ["post"],
    "/openapi.json": ["get"],
    "/webhook": ["get", "put"],
    "/webhook/deliveries": ["get"],
    "/webhook/deliveries/{id}/retry": ["post"],
  });
  assert.ok(doc.servers[0].url.endsWith("/openapi/v1"), doc.servers[0].url);
  assert.equal(doc.servers[0].url, `${PUBLIC_BASE_URL}/openapi/v1`);
  // What any route may answer: 503 while its instance stops; 408 to a body that never arrives.
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      const statuses = Object.keys(operation.responses);
      assert.ok(statuses.includes("503"), `${method} ${path}: 503 not declared`);
      assert.equal(
        statuses.includes("408"),
        operation.requestBody !== undefined,
        `${method} ${path}: 408 declared exactly where a body is read`,
      );
    }
  }
});

Deno.test("every $ref in the OpenAPI document resolves to a definition it contains", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const doc = await loadDocument(server.baseUrl);
  const refs = [...new Set(refsIn(doc))].sort();
  // The document refers to its shared schemas and headers rather than repeating them.
  for (const expected of ["#/components/schemas/Error", "#/components/headers/RateLimit"]) {
    assert.ok(refs.includes(expected), `no $ref to ${expected} among ${refs.join(", ")}`);
  }
  for (const ref of refs) resolveRef(doc, ref);
});

Deno.test("GET /conversations, /conversations/{id} and /conversations/{id}/messages answer as the document declares", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const open = await createVisitorChat(server.baseUrl, app.publicId);
  const closed = await createVisitorChat(server.baseUrl, app.publicId);
  const [closing] = await commitBatch(db.sql, [{
    kind: "chat.close",
    appId: app.appId,
    chatId: closed.chatId,
  }]);
  assert.equal(closing.ok, true);
  const doc = await loadDocument(server.baseUrl);
  const { key } = app;

  const all = await apiCall(server.baseUrl, "/conversations", { key });
  assert.equal(all.status, 200, JSON.stringify(all.json));
  assert.deepEqual(
    all.json.data.map((c: { id: number }) => c.id).sort(),
    [
      open.chatId,
      closed.chatId,
    ].sort(),
  );
  validateAnswer(doc, "GET", "/conversations", all);

  const onlyClosed = await apiCall(server.baseUrl, "/conversations?status=closed", { key });
  assert.equal(onlyClosed.status, 200, JSON.stringify(onlyClosed.json));
  assert.deepEqual(
    onlyClosed.json.data.map((c: { id: number; status: string }) => [
      c.id,
      c.status,
    ]),
    [[closed.chatId, "closed"]],
  );
  validateAnswer(doc, "GET", "/conversations", onlyClosed);

  const firstPage = await apiCall(server.baseUrl, "/conversations?limit=1", { key });
  assert.equal(firstPage.status, 200, JSON.stringify(firstPage.json));
  assert.ok(firstPage.headers.has("link"), "a first page of one of two has a Link header");
  validateAnswer(doc, "GET", "/conversations", firstPage);

  const bogus = await apiCall(server.baseUrl, "/conversations?status=bogus", { key });
  assert.equal(bogus.status, 400, JSON.stringify(bogus.json));
  validateAnswer(doc, "GET", "/conversations", bogus);

  const noKey = await apiCall(server.baseUrl, "/conversations");
  assert.equal(noKey.status, 401, JSON.stringify(noKey.json));
  validateAnswer(doc, "GET", "/conversations", noKey);

  const one = await apiCall(server.baseUrl, `/conversations/${open.chatId}`, { key });
  assert.equal(one.status, 200, JSON.stringify(one.json));
  assert.equal(one.json.data.id, open.chatId);
  validateAnswer(doc, "GET", "/conversations/{id}", one);

  for (const id of ["999999999", "abc"]) {
    const missing = await apiCall(server.baseUrl, `/conversations/${id}`, { key });
    assert.equal(missing.status, 404, JSON.stringify(missing.json));
    validateAnswer(doc, "GET", "/conversations/{id}", missing);
  }

  const reply = await apiCall(server.baseUrl, "/messages", {
    key,
    json: { chat_id: open.chatId, content: "Thanks for waiting" },
  });
  assert.equal(reply.status, 200, JSON.stringify(reply.json));
  const buttons = { text: "Pick", buttons: [{ id: "a", title: "A" }] };
  const rich = await apiCall(server.baseUrl, "/messages", {
    key,
    json: { chat_id: open.chatId, content: JSON.stringify(buttons), message_type: "buttons" },
  });
  assert.equal(rich.status, 200, JSON.stringify(rich.json));

  const history = await apiCall(server.baseUrl, `/conversations/${open.chatId}/messages`, { key });
  assert.equal(history.status, 200, JSON.stringify(history.json));
  const byId = new Map(
    history.json.data.map((m: { id: number }) => [m.id, m]),
  );
  assert.equal(byId.size, 3);
  assert.equal((byId.get(open.messageId) as { sender_type: string }).sender_type, "visitor");
  assert.equal(
    (byId.get(reply.json.data.message_id) as { sender_type: string }).sender_type,
    "bot",
  );
  assert.deepEqual((byId.get(rich.json.data.message_id) as { payload: unknown }).payload, buttons);
  validateAnswer(doc, "GET", "/conversations/{id}/messages", history);

  const noHistory = await apiCall(server.baseUrl, "/conversations/999999999/messages", { key });
  assert.equal(noHistory.status, 404, JSON.stringify(noHistory.json));
  validateAnswer(doc, "GET", "/conversations/{id}/messages", noHistory);
});

Deno.test("POST /messages answers 200, 400, 404, 413, 415 and 422 as the document declares", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  const doc = await loadDocument(server.baseUrl);
  const { key } = app;
  const send = (options: Parameters<typeof apiCall>[2]) =>
    apiCall(server.baseUrl, "/messages", { key, ...options });
  const keyed = { "idempotency-key": "a4b1" };
  const cases: [string, number, ApiAnswer][] = [
    ["JSON body", 200, await send({ json: { chat_id: chat.chatId, content: "hi" } })],
    ["form body", 200, await send({ form: { chat_id: String(chat.chatId), content: "hi" } })],
    ["missing chat_id", 400, await send({ json: { content: "hi" } })],
    ["unknown chat", 404, await send({ json: { chat_id: 999999999, content: "hi" } })],
    ["keyed", 200, await send({ json: { chat_id: chat.chatId, content: "hi" }, headers: keyed })],
    [
      "replayed",
      200,
      await send({ json: { chat_id: chat.chatId, content: "hi" }, headers: keyed }),
    ],
    [
      "key reused",
      422,
      await send({ json: { chat_id: chat.chatId, content: "ho" }, headers: keyed }),
    ],
    [
      "key malformed",
      400,
      await send({
        json: { chat_id: chat.chatId, content: "hi" },
        headers: { "idempotency-key": "" },
      }),
    ],
    [
      "text/plain",
      415,
      await send({ raw: "hi", headers: { "content-type": "text/plain" } }),
    ],
    [
      "body over 256 KiB",
      413,
      await send({
        raw: JSON.stringify({ chat_id: chat.chatId, content: "x".repeat(MAX_BODY_BYTES) }),
        headers: { "content-type": "application/json" },
      }),
    ],
  ];
  for (const [what, status, answer] of cases) {
    assert.equal(answer.status, status, `${what}: ${JSON.stringify(answer.json)}`);
    validateAnswer(doc, "POST", "/messages", answer);
  }
  const operation = operationOf(doc, "POST", "/messages") as Operation & {
    parameters?: { name: string; in: string; required: boolean }[];
  };
  assert.deepEqual(
    operation.parameters?.map(({ name, in: where, required }) => ({ name, in: where, required })),
    [{ name: "Idempotency-Key", in: "header", required: false }],
  );
  assert.ok(operation.responses["200"].headers?.["Idempotent-Replayed"]);
});

Deno.test("an unknown route and a wrong method under /openapi/v1 answer the documented Error shape", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const doc = await loadDocument(server.baseUrl);
  const unknown = await apiCall(server.baseUrl, "/no-such-route", { key: app.key });
  validateErrorAnswer(doc, unknown, 404);
  assert.equal(doc.paths["/no-such-route"], undefined);
  const wrongMethod = await apiCall(server.baseUrl, "/conversations", {
    key: app.key,
    method: "DELETE",
  });
  validateErrorAnswer(doc, wrongMethod, 405);
  assert.equal(doc.paths["/conversations"].delete, undefined);
});

Deno.test("a request over the rate limit answers a declared 429 with Retry-After and the rate-limit headers", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, { RATE_LIMIT_PER_MINUTE: "3" });
  const app = await createKeyedApp(db.sql);
  // The document is fetched without a key: its hits count in another bucket (the client IP).
  const doc = await loadDocument(server.baseUrl);
  await awayFromWindowEdge(db.sql);
  const answers: ApiAnswer[] = [];
  for (let i = 0; i < 4; i++) {
    answers.push(await apiCall(server.baseUrl, "/conversations", { key: app.key }));
  }
  assert.deepEqual(answers.map((answer) => answer.status), [200, 200, 200, 429]);
  for (const answer of answers) validateAnswer(doc, "GET", "/conversations", answer);
  assert.equal(answers[3].headers.get("x-ratelimit-remaining"), "0");
});

Deno.test("the documented request body of POST /messages accepts and rejects what the route does", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  const doc = await loadDocument(server.baseUrl);
  const content = operationOf(doc, "POST", "/messages").requestBody?.content ?? {};
  assert.deepEqual(Object.keys(content).sort(), [
    "application/json",
    "application/x-www-form-urlencoded",
  ]);
  const bodies: [JsonObject, boolean][] = [
    [{ chat_id: 5, content: "hi" }, true],
    [{ chat_id: "5", content: "hi", message_type: "markdown" }, true],
    [{ content: "hi" }, false],
  ];
  for (const [mediaType, { schema }] of Object.entries(content)) {
    for (const [body, accepted] of bodies) {
      assert.equal(isValid(doc, schema, body), accepted, `${mediaType} ${JSON.stringify(body)}`);
    }
  }
  // The route agrees: the same shapes, with the real conversation's id, in both encodings.
  for (const [body, accepted] of bodies) {
    const real = "chat_id" in body
      ? { ...body, chat_id: typeof body.chat_id === "number" ? chat.chatId : String(chat.chatId) }
      : body;
    const asJson = await apiCall(server.baseUrl, "/messages", { key: app.key, json: real });
    const asForm = await apiCall(server.baseUrl, "/messages", {
      key: app.key,
      form: Object.fromEntries(Object.entries(real).map(([name, value]) => [name, String(value)])),
    });
    for (const answer of [asJson, asForm]) {
      assert.equal(answer.status, accepted ? 200 : 400, JSON.stringify([real, answer.json]));
    }
  }
});

Deno.test("GET /openapi.json's own answers match what its operation declares", async (t) => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, { RATE_LIMIT_PER_MINUTE: "3" });
  await awayFromWindowEdge(db.sql);
  const first = await apiCall(server.baseUrl, "/openapi.json");
  assert.equal(first.status, 200, JSON.stringify(first.json));
  const doc = first.json as OpenApiDocument;
  await t.step("its 200 body validates against the declared schema", () => {
    validateAnswer(doc, "GET", "/openapi.json", first);
  });
  await t.step("over the rate limit it answers a declared 429", async () => {
    const answers: ApiAnswer[] = [];
    for (let i = 0; i < 3; i++) answers.push(await apiCall(server.baseUrl, "/openapi.json"));
    assert.deepEqual(answers.map((answer) => answer.status), [200, 200, 429]);
    validateAnswer(doc, "GET", "/openapi.json", answers[2]);
  });
});

Deno.test("GET and PUT /webhook answer as the document declares", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, { PUBLIC_BASE_URL }, {
    resolveHost: (name) => Promise.resolve(name === "hooks.example.com" ? ["93.184.216.34"] : []),
  });
  const app = await createKeyedApp(db.sql);
  const doc = await loadDocument(server.baseUrl);
  const put = (json: unknown) =>
    apiCall(server.baseUrl, "/webhook", { method: "PUT", key: app.key, json });

  validateAnswer(
    doc,
    "get",
    "/webhook",
    await apiCall(server.baseUrl, "/webhook", { key: app.key }),
  );
  validateAnswer(
    doc,
    "put",
    "/webhook",
    await put({ url: "https://hooks.example.com/in", events: ["chat.ended"] }),
  );
  validateAnswer(
    doc,
    "get",
    "/webhook",
    await apiCall(server.baseUrl, "/webhook", { key: app.key }),
  );
  validateAnswer(doc, "put", "/webhook", await put({ url: "https://nowhere.example.com/" }));
  validateAnswer(doc, "put", "/webhook", await put({ events: 5 }));
  validateAnswer(
    doc,
    "put",
    "/webhook",
    await apiCall(server.baseUrl, "/webhook", {
      method: "PUT",
      key: app.key,
      raw: "url=x",
      headers: { "content-type": "text/plain" },
    }),
  );
});

Deno.test("GET, PUT and DELETE /flow answer as the document declares, marked as an extension", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, { PUBLIC_BASE_URL });
  const app = await createKeyedApp(db.sql);
  const doc = await loadDocument(server.baseUrl);
  const flow = {
    start: "hi",
    nodes: {
      hi: {
        message: {
          message_type: "buttons",
          content: { text: "Hi", buttons: [{ id: "human", title: "A human" }] },
        },
        on: { human: "handoff" },
      },
    },
  };
  const call = (method: string, json?: unknown) =>
    apiCall(server.baseUrl, "/flow", { method, key: app.key, json });

  validateAnswer(doc, "get", "/flow", await call("GET"));
  validateAnswer(doc, "put", "/flow", await call("PUT", flow));
  validateAnswer(doc, "get", "/flow", await call("GET"));
  validateAnswer(doc, "put", "/flow", await call("PUT", { ...flow, start: "bye" }));
  validateAnswer(doc, "delete", "/flow", await call("DELETE"));
  const body = operationOf(doc, "put", "/flow").requestBody?.content["application/json"];
  assert.ok(body);
  assert.ok(isValid(doc, body.schema, flow));
  assert.ok(!isValid(doc, body.schema, { start: "hi" }));

  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const extension = operation["x-parley-extension"] === true;
      const expected = ["/flow", "/webhook/deliveries", "/webhook/deliveries/{id}/retry"]
        .includes(path) || path === "/conversations/{id}/messages" || path === "/openapi.json";
      assert.equal(extension, expected, `${method} ${path}`);
    }
  }
});
