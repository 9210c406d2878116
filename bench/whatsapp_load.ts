/**
 * The WhatsApp inbound benchmark of `deno task bench` (issue 6): one application's WhatsApp
 * channel configured on the running server's database, Meta-format webhook deliveries signed
 * with its app secret, and the 1,000-update delivery whose time to be applied is measured by
 * polling the database.
 *
 * Signing costs the load generator ~25 µs per request, a quarter of what it spends on a request
 * otherwise: the bodies of the load are signed before the measured window
 * ({@linkcode webhookRequests}), and only a run faster than that pool signs as it goes.
 */
import { whatsappWebhookBody } from "../tests/support/whatsapp_webhook.ts";
import type { LoadRequest } from "./load.ts";
import { executeCommand } from "../src/cli.ts";
import { connect, type Sql } from "../src/db/client.ts";
import { type DatabaseLocation, openDatabase } from "../src/db/database.ts";
import { loadEncryptionKey } from "../src/crypto/encryption_key.ts";
import { createSecretBox } from "../src/crypto/secret_box.ts";
import { metaSignature } from "../src/channels/whatsapp/signature.ts";

/** The ack scenario's name in the table. */
export const WHATSAPP_SCENARIO = "POST /api/v1/whatsapp/webhook (ack)";

const PHONE_NUMBER_ID = "106540352242922";
const APP_SECRET = "bench-meta-app-secret";
/**
 * Customers of the batch start here, past those of the load: each is a new client with a new
 * conversation, the heavier case (from the load's customers it applies ~30 % faster).
 */
const BATCH_CUSTOMER_OFFSET = 1_000_000;

/** A configured channel, and a connection to the database its deliveries are stored in. */
export interface WhatsAppBench extends AsyncDisposable {
  appId: number;
  sql: Sql;
}

/**
 * Creates an application and configures its WhatsApp channel on the running server's database,
 * sealing the secrets with the key the server generated in `dataDir` at its start.
 */
export async function setUpWhatsApp(dataDir: string): Promise<WhatsAppBench> {
  const database: DatabaseLocation = await openDatabase({ databaseUrl: null, dataDir });
  const sql = connect(database.url, { max: 1 });
  try {
    const box = createSecretBox(await loadEncryptionKey({ configured: null, dataDir }));
    const app = await executeCommand(sql, {
      command: "app:create",
      flags: { name: "Bench WhatsApp" },
    }) as { id: number };
    await executeCommand(sql, {
      command: "whatsapp:configure",
      flags: {
        app: String(app.id),
        "phone-number-id": PHONE_NUMBER_ID,
        "access-token": "bench-access-token",
        "app-secret": APP_SECRET,
        "verify-token": "bench-verify-token",
      },
    }, { secretBox: () => Promise.resolve(box) });
    return {
      appId: app.id,
      sql,
      async [Symbol.asyncDispose]() {
        await sql.end();
        await database.close();
      },
    };
  } catch (error) {
    await sql.end();
    await database.close();
    throw error;
  }
}

const encoder = new TextEncoder();

function waIdOf(customer: number): string {
  return String(15_550_000_000 + customer);
}

/** A webhook body as Meta sends it: one change of the business number, with these messages. */
function webhookBody(messages: { customer: number; wamid: string; text: string }[]): string {
  const now = String(Math.floor(Date.now() / 1000));
  const customers = [...new Set(messages.map((m) => m.customer))];
  return JSON.stringify(whatsappWebhookBody(PHONE_NUMBER_ID, {
    contacts: customers.map((c) => ({ profile: { name: `Customer ${c}` }, wa_id: waIdOf(c) })),
    messages: messages.map((m) => ({
      from: waIdOf(m.customer),
      id: m.wamid,
      timestamp: now,
      type: "text",
      text: { body: m.text },
    })),
  }));
}

function signedRequest(appId: number, body: string): LoadRequest {
  return {
    method: "POST",
    path: `/api/v1/whatsapp/webhook/${appId}`,
    headers: {
      "content-type": "application/json",
      "x-hub-signature-256": metaSignature(encoder.encode(body), APP_SECRET),
    },
    body,
  };
}

/** Request `index` of the load: one text message of customer `index % customers`. */
function webhookRequest(appId: number, index: number, customers: number): LoadRequest {
  return signedRequest(
    appId,
    webhookBody([{
      customer: index % customers,
      wamid: `wamid.bench.load.${index}`,
      text: `Benchmark message ${index}`,
    }]),
  );
}

/**
 * The load's requests: the first `signed` made (and signed) now, any further one when asked for.
 * Every request carries a wamid of its own; request `index` is the load's `first + index`-th,
 * so that loads with different `first` never repeat each other's wamids.
 */
export function webhookRequests(
  appId: number,
  customers: number,
  signed: number,
  first = 0,
): { make: (index: number) => LoadRequest; signedAhead: number } {
  const pool = Array.from(
    { length: signed },
    (_, i) => webhookRequest(appId, first + i, customers),
  );
  return {
    make: (index) => pool[index] ?? webhookRequest(appId, first + index, customers),
    signedAhead: pool.length,
  };
}

/** What {@linkcode measureBatch} measured. */
export interface BatchResult {
  /** Deliveries of the load, and how long after it ended the last of them was applied. */
  backlog: { deliveries: number; drainedMs: number };
  updates: number;
  /** Customers the updates came from, none known before. */
  customers: number;
  ackMs: number;
  appliedMs: number;
}

async function pause(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Waits (5 minutes at most) until every delivery of the load is applied, then posts one signed
 * delivery of `updates` text messages (`perCustomer` from each of new customers, interleaved)
 * and polls (every 5 ms) until it is applied; times are from sending the request.
 */
export async function measureBatch(
  bench: WhatsAppBench,
  parley: string,
  updates = 1000,
  perCustomer = 5,
): Promise<BatchResult> {
  const { sql, appId } = bench;
  const loadEnded = performance.now();
  const [{ deliveries }] = await sql<{ deliveries: number }[]>`
    SELECT count(*)::int AS deliveries FROM whatsapp_deliveries WHERE app_id = ${appId}`;
  for (;;) {
    const [{ pending }] = await sql<{ pending: number }[]>`
      SELECT count(*)::int AS pending FROM whatsapp_deliveries
      WHERE app_id = ${appId} AND processed_at IS NULL`;
    if (pending === 0) break;
    if (performance.now() - loadEnded > 300_000) {
      throw new Error(`${pending} WhatsApp deliveries still unprocessed 5 minutes after the load`);
    }
    await pause(50);
  }
  const drainedMs = performance.now() - loadEnded;

  const customers = Math.ceil(updates / perCustomer);
  const messages = Array.from({ length: updates }, (_, i) => ({
    customer: BATCH_CUSTOMER_OFFSET + (i % customers),
    wamid: `wamid.bench.batch.${i}`,
    text: `Batch message ${i}`,
  }));
  const request = signedRequest(appId, webhookBody(messages));
  const url = `${parley}${request.path}`;
  const started = performance.now();
  const res = await fetch(url, { method: "POST", headers: request.headers, body: request.body });
  await res.body?.cancel();
  const ackMs = performance.now() - started;
  if (res.status !== 200) throw new Error(`the batch was answered ${res.status}`);
  const [{ id }] = await sql<{ id: number }[]>`
    SELECT max(id) AS id FROM whatsapp_deliveries WHERE app_id = ${appId}`;
  for (;;) {
    const [{ done }] = await sql<{ done: boolean }[]>`
      SELECT processed_at IS NOT NULL AS done FROM whatsapp_deliveries
      WHERE app_id = ${appId} AND id = ${id}`;
    if (done) break;
    if (performance.now() - started > 120_000) {
      throw new Error("the 1,000-update delivery was not applied within 2 minutes");
    }
    await pause(5);
  }
  const appliedMs = performance.now() - started;
  const [{ stored }] = await sql<{ stored: number }[]>`
    SELECT count(*)::int AS stored FROM messages
    WHERE app_id = ${appId} AND external_id = ANY(${messages.map((m) => m.wamid)})`;
  if (stored !== updates) {
    throw new Error(`the batch's delivery was applied with ${stored} of ${updates} messages`);
  }
  return { backlog: { deliveries, drainedMs }, updates, customers, ackMs, appliedMs };
}

/** The line printed after the table. */
export function batchLine(result: BatchResult): string {
  return `whatsapp: a ${result.updates.toLocaleString("en-US")}-update delivery ` +
    `(${result.customers} new customers) acknowledged in ` +
    `${result.ackMs.toFixed(0)} ms and applied in ${result.appliedMs.toFixed(0)} ms ` +
    `(target ≤ 1 s); the load's ${result.backlog.deliveries} deliveries were all applied ` +
    `${(result.backlog.drainedMs / 1000).toFixed(1)} s after it ended`;
}
