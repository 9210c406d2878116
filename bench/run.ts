/**
 * `deno task bench`: starts Parley on a fresh embedded database and a Hono hello-world server,
 * drives both with the same closed-loop load (64 connections) — the hello route, visitor
 * messages, Open API replies (POST /openapi/v1/messages) and Open API listings
 * (GET /openapi/v1/conversations), with one API key per application; signed WhatsApp webhook
 * deliveries of one text message each from many customers (POST /api/v1/whatsapp/webhook); and
 * signed Slack Events API deliveries, each one member's reply in a thread that mirrors a visitor
 * conversation, of an application installed through the real install flow (POST
 * /api/v1/slack/events) — the latency of both channels' rows is the ack's: deliveries are stored,
 * answered, and applied after the 200. With a WebSocket open for every visitor, Open API replies
 * to them at a fixed rate and at saturation, timing each reply's frame from the message's insert
 * to its arrival (bench/socket_load.ts; CONTRACT §3's target: p99 within 100 ms of the commit).
 * It prints a table of requests/s, p50 and p99 per scenario, with each scenario's ratio to hello
 * and the CPU that the server, its PostgreSQL and the load generator spent per request (from
 * /proc; it drifts much less than requests/s on a shared machine), and the cores that other
 * processes kept busy meanwhile ("others' cores": the machine's busy time less the benchmark's
 * own; on a shared machine, what decides the tails). After the table: once the WhatsApp load's
 * backlog is applied, how long one 1,000-update delivery takes to be acknowledged and applied (bench/whatsapp_load.ts); how long
 * after the Slack load every stored Slack delivery was applied (bench/slack_load.ts); and how
 * webhook deliveries of Open API replies kept up. A fake Graph API and a fake Slack
 * (tests/support, the latter in this process) stand in for WHATSAPP_GRAPH_URL and SLACK_API_URL.
 *
 * Environment: BENCH_SECONDS (measured seconds per scenario, default 10), BENCH_VISITORS (default
 * 2000), BENCH_APPS (default 20, one API key each), BENCH_CONNECTIONS (default 64), WORKERS
 * (Parley's actor workers, default 1: group commits form within a worker, and on 2 cores one worker
 * batches best — see docs/architecture.md), BENCH_ONLY (a word; runs only the scenarios whose name
 * contains it, beside hello; `whatsapp` runs the WhatsApp ones, `slack` the Slack one),
 * BENCH_WHATSAPP_CUSTOMERS (distinct wa_ids of the WhatsApp load, default 2000),
 * BENCH_WHATSAPP_RATE (deliveries/s signed ahead of the WhatsApp load, default 5000; faster runs
 * sign the rest as they go), BENCH_SLACK_THREADS (mirrored conversations the Slack events reply
 * in, default 200), BENCH_SLACK_RATE (events/s signed ahead of the Slack load, default 5000),
 * BENCH_WHATSAPP_ACK_RATE and BENCH_SLACK_ACK_RATE (the fixed rates, default 2000 and 1000, at
 * which each channel's ack latency is also measured with an open-loop load, before its
 * saturation run),
 * BENCH_SOCKET_RATE (replies/s of the sockets' fixed-rate run, default 1000; BENCH_ONLY=socket
 * runs the socket scenarios),
 * BENCH_DENO_FLAGS (extra `deno run` flags for Parley, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`).
 */
import { freePort } from "../src/db/embedded.ts";
import { type LoadRequest, type LoadResult, runLoad } from "./load.ts";
import {
  cpuSecondsByThread,
  cpuSecondsOf,
  cpuSecondsOfDescendants,
  machineBusySeconds,
  waitUntilIdle,
} from "./cpu.ts";
import { executeCommand } from "../src/cli.ts";
import { connect } from "../src/db/client.ts";
import { openDatabase } from "../src/db/database.ts";
import type { ReceiverStats } from "./webhook_receiver.ts";
import { selfSignedCertificate } from "../tests/support/tls.ts";
import { startFakeGraphApi } from "../tests/support/fake_graph_api.ts";
import {
  batchLine,
  measureBatch,
  setUpWhatsApp,
  webhookRequests,
  WHATSAPP_SCENARIO,
} from "./whatsapp_load.ts";
import { openVisitorSockets, type SocketLatency, socketLine } from "./socket_load.ts";
import {
  drainLine,
  eventRequests,
  measureDrain,
  setUpSlack,
  SLACK_SCENARIO,
  slackEnv,
  startBenchSlack,
} from "./slack_load.ts";

/** A scenario's outcome: the load's figures and the CPU each party spent per request. */
interface Measured {
  name: string;
  load: LoadResult;
  /** CPU µs per request of the server process, of PostgreSQL (null: none), of the load generator. */
  cpu: { server: number; postgres: number | null; load: number };
  /** The server's CPU µs per request by thread name (see `cpuSecondsByThread`). */
  threads: Map<string, number>;
  /** The cores that processes other than the benchmark's kept busy meanwhile, on average. */
  othersCores: number;
  /** Whether the load came at a fixed rate (open loop): its req/s is that rate, no ratio. */
  fixedRate: boolean;
}

/** Runs `load` while measuring the CPU of `server` (and its PostgreSQL, when it has one). */
async function measure(
  name: string,
  server: Deno.ChildProcess,
  withPostgres: boolean,
  load: () => Promise<LoadResult>,
  options: { fixedRate?: boolean } = {},
): Promise<Measured> {
  const usage = () => ({
    server: cpuSecondsOf(server.pid),
    postgres: withPostgres ? cpuSecondsOfDescendants(server.pid) : 0,
    load: cpuSecondsOf(Deno.pid),
    threads: cpuSecondsByThread(server.pid),
    machine: machineBusySeconds(),
    at: performance.now(),
  });
  const idle = await waitUntilIdle(() =>
    cpuSecondsOf(server.pid) + (withPostgres ? cpuSecondsOfDescendants(server.pid) : 0)
  );
  console.error(
    idle.settled
      ? `  settled in ${(idle.waitedMs / 1000).toFixed(1)} s`
      : `  note: still busy after ${(idle.waitedMs / 1000).toFixed(1)} s; measuring anyway`,
  );
  const before = usage();
  const result = await load();
  const after = usage();
  const used = {
    server: after.server - before.server,
    postgres: after.postgres - before.postgres,
    load: after.load - before.load,
  };
  const ours = used.server + used.postgres + used.load;
  const wallSeconds = (after.at - before.at) / 1000;
  const othersCores = Math.max(0, (after.machine - before.machine - ours) / wallSeconds);
  const perRequest = (seconds: number) => (seconds * 1e6) / Math.max(1, result.completed);
  const threads = new Map<string, number>();
  for (const [thread, seconds] of after.threads) {
    const spent = perRequest(seconds - (before.threads.get(thread) ?? 0));
    if (spent >= 0.5) threads.set(thread, spent);
  }
  return {
    name,
    load: result,
    threads,
    fixedRate: options.fixedRate ?? false,
    othersCores,
    cpu: {
      server: perRequest(used.server),
      postgres: withPostgres ? perRequest(used.postgres) : null,
      load: perRequest(used.load),
    },
  };
}

const seconds = Number(Deno.env.get("BENCH_SECONDS") ?? 10);
const visitorCount = Number(Deno.env.get("BENCH_VISITORS") ?? 2000);
const appCount = Number(Deno.env.get("BENCH_APPS") ?? 20);
const connections = Number(Deno.env.get("BENCH_CONNECTIONS") ?? 64);
const workers = Deno.env.get("WORKERS") ?? "1";
const whatsappCustomers = Number(Deno.env.get("BENCH_WHATSAPP_CUSTOMERS") ?? 2000);
const whatsappRate = Number(Deno.env.get("BENCH_WHATSAPP_RATE") ?? 5000);
const slackThreads = Number(Deno.env.get("BENCH_SLACK_THREADS") ?? 200);
const slackRate = Number(Deno.env.get("BENCH_SLACK_RATE") ?? 5000);
/**
 * The channels' ack latency is also measured at a fixed offered load (open loop), beside the
 * saturation the closed loop finds: twice the most one WhatsApp business number can carry (Meta's
 * Cloud API: 1,000 messages/s in and out, on an upgraded number), and the deliveries of 120
 * Slack workspaces each at the Events API's cap (30,000 events an hour per workspace, ~8/s).
 */
const whatsappAckRate = Number(Deno.env.get("BENCH_WHATSAPP_ACK_RATE") ?? 2000);
const slackAckRate = Number(Deno.env.get("BENCH_SLACK_ACK_RATE") ?? 1000);
/** Replies/s of the open-loop run whose frames the visitor sockets time. */
const socketRate = Number(Deno.env.get("BENCH_SOCKET_RATE") ?? 1000);
/** The scenario of Open API replies to visitors whose sockets are open (BENCH_ONLY=socket). */
const SOCKET_SCENARIO = "POST /openapi/v1/messages to visitor sockets";
/** Where the fixed-rate loads' requests start: past any saturation run's. */
const FIXED_RATE_FIRST = 100_000_000;
const root = new URL("../", import.meta.url).pathname;

const dataDir = await Deno.makeTempDir({ prefix: "parley-bench-" });
const children: Deno.ChildProcess[] = [];
// Inbound WhatsApp text never calls the Graph API, but nothing may reach Meta if it did.
const graph = await startFakeGraphApi();
// Parley's Slack app: its OAuth exchange, users.info and the mirror's posts.
const fakeSlack = await startBenchSlack();
const certificate = await selfSignedCertificate(["localhost"]);
const caFile = `${dataDir}-ca.pem`;
const keyFile = `${dataDir}-key.pem`;
await Deno.writeTextFile(caFile, certificate.cert);
await Deno.writeTextFile(keyFile, certificate.key);
try {
  const receiverPort = await freePort();
  children.push(
    spawn(
      ["run", "-A", `${root}bench/webhook_receiver.ts`, String(receiverPort), caFile, keyFile],
      {},
    ),
  );
  const receiverUrl = `https://127.0.0.1:${receiverPort}/hook`;
  const receiverClient = Deno.createHttpClient({ caCerts: [certificate.cert] });
  const parleyPort = await freePort();
  const parley = `http://127.0.0.1:${parleyPort}`;
  const parleyFlags = (Deno.env.get("BENCH_DENO_FLAGS") ?? "").split(" ").filter(Boolean);
  const parleyProcess = spawn(["run", "-A", ...parleyFlags, `${root}main.ts`], {
    PORT: String(parleyPort),
    DATA_DIR: dataDir,
    LOG_LEVEL: "warn",
    WIDGET_RATE_LIMIT_PER_MINUTE: "100000000",
    RATE_LIMIT_PER_MINUTE: "100000000",
    WORKERS: workers,
    WEBHOOK_ALLOW_PRIVATE_HOSTS: "127.0.0.1/32",
    WEBHOOK_CA_FILE: caFile,
    WHATSAPP_GRAPH_URL: graph.url,
    ...slackEnv(fakeSlack, parley),
  });
  children.push(parleyProcess);
  const helloPort = await freePort();
  const helloProcess = spawn(["run", "-A", `${root}bench/hello_server.ts`, String(helloPort)], {});
  children.push(helloProcess);
  const hello = `http://127.0.0.1:${helloPort}`;
  await waitFor(`${parley}/healthz`);
  await waitFor(`${hello}/`);

  const { tokens, chats } = await createFixtures(parley, dataDir);
  const load = { connections, durationMs: seconds * 1000, warmupMs: 2000 };
  const only = Deno.env.get("BENCH_ONLY");
  /** An Open API reply into the i-th conversation (round robin), its text starting with `text`. */
  const openApiReply = (text: string) => (i: number): LoadRequest => {
    const chat = chats[i % chats.length];
    return {
      method: "POST",
      path: "/openapi/v1/messages",
      headers: { "content-type": "application/json", authorization: `Bearer ${chat.key}` },
      body: JSON.stringify({ chat_id: chat.chatId, content: `${text} ${i}` }),
    };
  };
  const scenarios: [string, (i: number) => LoadRequest][] = [
    ["POST /api/v1/widget/messages", (i) => ({
      method: "POST",
      path: "/api/v1/widget/messages",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${tokens[i % tokens.length]}`,
      },
      body: JSON.stringify({ content: `Benchmark message ${i}` }),
    })],
    ["POST /openapi/v1/messages", openApiReply("Reply")],
    ["GET /openapi/v1/conversations", (i) => ({
      method: "GET",
      path: "/openapi/v1/conversations",
      headers: { authorization: `Bearer ${chats[i % chats.length].key}` },
    })],
  ];
  /** Measures an ack scenario at a fixed offered rate; its row is named after the rate. */
  const measureAtRate = (scenario: string, rate: number, make: (i: number) => LoadRequest) => {
    const name = scenario.replace("(ack)", `(ack at ${rate}/s)`);
    console.error(`running: ${name}`);
    return measure(
      name,
      parleyProcess,
      true,
      () => runLoad(make, { ...load, port: parleyPort, ratePerSecond: rate }),
      { fixedRate: true },
    );
  };
  console.error("running: GET hello");
  const results: Measured[] = [
    await measure(
      "GET hello (Hono baseline)",
      helloProcess,
      false,
      () => runLoad(() => ({ method: "GET", path: "/" }), { ...load, port: helloPort }),
    ),
  ];
  for (const [name, make] of scenarios) {
    if (only && !name.includes(only)) continue;
    console.error(`running: ${name}`);
    results.push(
      await measure(name, parleyProcess, true, () => runLoad(make, { ...load, port: parleyPort })),
    );
  }
  let socketsLine = "";
  if (!only || SOCKET_SCENARIO.includes(only)) {
    console.error(`opening: ${tokens.length} visitor sockets`);
    await using sockets = await openVisitorSockets(parleyPort, tokens, "Socket ");
    const reply = openApiReply("Socket");
    const runs: { name: string; sent: number; latency: SocketLatency }[] = [];
    let sent = 0;
    for (const rate of [socketRate, undefined]) {
      const name = rate === undefined ? SOCKET_SCENARIO : `${SOCKET_SCENARIO} at ${rate}/s`;
      console.error(`running: ${name}`);
      const startedAt = performance.timeOrigin + performance.now();
      const first = sent;
      const measured = await measure(
        name,
        parleyProcess,
        true,
        () =>
          runLoad((i) => reply(first + i), {
            ...load,
            port: parleyPort,
            ...(rate === undefined ? {} : { ratePerSecond: rate }),
          }),
        { fixedRate: rate !== undefined },
      );
      results.push(measured);
      sent += measured.load.completed;
      await sockets.waitFor(sent, 10_000);
      const from = startedAt + load.warmupMs;
      runs.push({
        name: rate === undefined ? "at saturation" : `at ${rate}/s`,
        sent: measured.load.requests,
        latency: sockets.latency(from, from + load.durationMs),
      });
    }
    socketsLine = socketLine(sockets.open, runs, sent - sockets.received);
  }
  let whatsappLine = "";
  if (!only || WHATSAPP_SCENARIO.includes(only)) {
    await using whatsapp = await setUpWhatsApp(dataDir);
    const paced = webhookRequests(
      whatsapp.appId,
      whatsappCustomers,
      whatsappAckRate * (seconds + load.warmupMs / 1000),
      FIXED_RATE_FIRST,
    );
    results.push(await measureAtRate(WHATSAPP_SCENARIO, whatsappAckRate, paced.make));
    // Enough signed ahead for the load's whole time at a rate it does not reach on 2 cores.
    const expected = whatsappRate * (seconds + load.warmupMs / 1000);
    const requests = webhookRequests(whatsapp.appId, whatsappCustomers, expected);
    console.error(`running: ${WHATSAPP_SCENARIO}`);
    const measured = await measure(
      WHATSAPP_SCENARIO,
      parleyProcess,
      true,
      () => runLoad(requests.make, { ...load, port: parleyPort }),
    );
    results.push(measured);
    if (measured.load.completed > requests.signedAhead) {
      console.error(
        `note: ${measured.load.completed - requests.signedAhead} webhook requests were signed ` +
          `during the load (raise BENCH_WHATSAPP_RATE)`,
      );
    }
    console.error("running: a 1,000-update WhatsApp delivery");
    whatsappLine = batchLine(await measureBatch(whatsapp, parley));
  }
  let slackLine = "";
  if (!only || SLACK_SCENARIO.includes(only)) {
    console.error(`setting up: ${slackThreads} Slack threads`);
    await using slack = await setUpSlack(dataDir, parley, fakeSlack, slackThreads);
    const paced = eventRequests(
      slack,
      slackAckRate * (seconds + load.warmupMs / 1000),
      FIXED_RATE_FIRST,
    );
    results.push(await measureAtRate(SLACK_SCENARIO, slackAckRate, paced.make));
    const requests = eventRequests(slack, slackRate * (seconds + load.warmupMs / 1000));
    console.error(`running: ${SLACK_SCENARIO}`);
    results.push(
      await measure(
        SLACK_SCENARIO,
        parleyProcess,
        true,
        () => runLoad(requests.make, { ...load, port: parleyPort }),
      ),
    );
    if (requests.signedLate() > 0) {
      console.error(
        `note: ${requests.signedLate()} Slack events were signed during the load ` +
          `(raise BENCH_SLACK_RATE)`,
      );
    }
    slackLine = drainLine(await measureDrain(slack));
  }
  let webhookLine = "";
  const webhookScenario = "POST /openapi/v1/messages with webhooks";
  if (!only || webhookScenario.includes(only)) {
    for (const key of new Set(chats.map((chat) => chat.key))) {
      const res = await fetch(`${parley}/openapi/v1/webhook`, {
        method: "PUT",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ url: receiverUrl, events: ["message.sent"] }),
      });
      if (!res.ok) throw new Error(`PUT /webhook: ${res.status} ${await res.text()}`);
    }
    console.error(`running: ${webhookScenario}`);
    const startedAt = Date.now();
    const measured = await measure(
      webhookScenario,
      parleyProcess,
      true,
      () => runLoad(scenarios[1][1], { ...load, port: parleyPort }),
    );
    results.push(measured);
    webhookLine = await webhookReport(
      () =>
        fetch(`https://127.0.0.1:${receiverPort}/stats`, { client: receiverClient })
          .then((res) => res.json() as Promise<ReceiverStats>),
      measured.load.completed,
      startedAt,
    );
  }
  printTable(results);
  if (socketsLine) console.log(socketsLine);
  if (whatsappLine) console.log(whatsappLine);
  if (slackLine) console.log(slackLine);
  if (webhookLine) console.log(webhookLine);
} finally {
  for (const child of children) {
    try {
      child.kill("SIGTERM");
    } catch {
      // already gone
    }
    await child.status;
  }
  await graph[Symbol.asyncDispose]();
  await fakeSlack[Symbol.asyncDispose]();
  await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  await Deno.remove(caFile).catch(() => {});
  await Deno.remove(keyFile).catch(() => {});
}

/**
 * Waits (60 s at most) for the deliveries of the `sent` replies, then describes them: latency
 * after commit, the delivery rate during the load, and how long the backlog took to drain.
 */
async function webhookReport(
  stats: () => Promise<ReceiverStats>,
  sent: number,
  startedAt: number,
): Promise<string> {
  const loadEnded = Date.now();
  let { deliveries } = await stats();
  while (deliveries.length < sent && Date.now() - loadEnded < 60_000) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    ({ deliveries } = await stats());
  }
  const drainedAfter = (Date.now() - loadEnded) / 1000;
  const latencies = deliveries.map((d) => d.latencyMs).sort((a, b) => a - b);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  const duringLoad = deliveries.filter((d) => d.at <= loadEnded).length;
  const seconds = (loadEnded - startedAt) / 1000;
  return `webhooks: ${deliveries.length} of ${sent} replies delivered, ` +
    `p50 ${at(0.5)} ms, p99 ${at(0.99)} ms after commit, ${(duringLoad / seconds).toFixed(0)} ` +
    `deliveries/s during the load (sends ${(sent / seconds).toFixed(0)}/s), ` +
    `backlog drained ${drainedAfter.toFixed(1)} s after the load`;
}

function spawn(args: string[], env: Record<string, string>): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args,
    env,
    stdin: "null",
    stdout: "null",
    stderr: "inherit",
  }).spawn();
}

async function waitFor(url: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    try {
      const res = await fetch(url);
      await res.body?.cancel();
      if (res.ok) return;
    } catch {
      // not yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not come up`);
}

/** A conversation to reply to, and the key of its application. */
interface BenchChat {
  chatId: number;
  key: string;
}

/**
 * Applications with one API key each (made in-process on the running server's database), and
 * visitors spread over them, each with one open conversation.
 */
async function createFixtures(
  parley: string,
  dataDir: string,
): Promise<{ tokens: string[]; chats: BenchChat[] }> {
  const database = await openDatabase({ databaseUrl: null, dataDir });
  const sql = connect(database.url, { max: 1 });
  const apps: { publicId: string; key: string }[] = [];
  try {
    for (let i = 0; i < appCount; i++) {
      const app = await executeCommand(sql, {
        command: "app:create",
        flags: { name: `Bench ${i}` },
      }) as { id: number; public_id: string };
      const key = await executeCommand(sql, {
        command: "key:create",
        flags: { app: String(app.id), name: "bench" },
      }) as { key: string };
      apps.push({ publicId: app.public_id, key: key.key });
    }
  } finally {
    await sql.end();
    await database.close();
  }
  const tokens: string[] = [];
  const chats: BenchChat[] = [];
  for (let i = 0; i < visitorCount; i += 50) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(50, visitorCount - i) }, async (_, j) => {
        const app = apps[(i + j) % apps.length];
        const res = await fetch(`${parley}/api/v1/widget/${app.publicId}/visitors`, {
          method: "POST",
        });
        const token = (await res.json()).data.visitor_token as string;
        const sent = await fetch(`${parley}/api/v1/widget/messages`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ content: "Hello" }),
        });
        const chatId = (await sent.json()).data.chat_id as number;
        return { token, chat: { chatId, key: app.key } };
      }),
    );
    tokens.push(...batch.map((b) => b.token));
    chats.push(...batch.map((b) => b.chat));
  }
  return { tokens, chats };
}

function printTable(results: Measured[]): void {
  const baseline = results[0].load.rps;
  const rows = results.map(({ name, load: r, cpu, fixedRate, othersCores }) => [
    name,
    r.rps.toFixed(0),
    r.p50Ms.toFixed(2),
    r.p99Ms.toFixed(2),
    String(r.errors),
    fixedRate ? "-" : (r.rps / baseline).toFixed(2),
    [cpu.server, cpu.postgres, cpu.load].map((v) => v === null ? "-" : v.toFixed(0)).join(" / "),
    othersCores.toFixed(2),
  ]);
  const header = [
    "scenario",
    "req/s",
    "p50 ms",
    "p99 ms",
    "errors",
    "ratio to hello",
    "CPU µs/req server / pg / load",
    "others' cores",
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
  for (const row of rows) console.log(line(row));
  console.log("\nServer CPU µs/req by thread (deno: main thread, worker-1: the actors' worker):");
  for (const { name, threads } of results) {
    const parts = [...threads].sort((a, b) => b[1] - a[1])
      .map(([thread, used]) => `${thread} ${used.toFixed(0)}`);
    console.log(`- ${name}: ${parts.join(", ")}`);
  }
  console.log(
    `\n${connections} connections, ${seconds} s measured per scenario, ${visitorCount} visitors ` +
      `in ${appCount} applications (one API key each), WORKERS=${workers}`,
  );
}
