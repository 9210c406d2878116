/**
 * Starts and stops a whole Parley instance: database (embedded or external), migrations,
 * the actor pool, the realtime hub on its LISTEN connection, and the HTTP server. Shutdown
 * runs in the reverse order: stop accepting and finish requests, close sockets, drain the
 * actors, close the database, stop the embedded PostgreSQL.
 */
import type { Config } from "./config.ts";
import { awaitFirstContact, connect } from "./db/client.ts";
import { openDatabase } from "./db/database.ts";
import { checkEncryptionKey } from "./db/key_check.ts";
import { migrate } from "./db/migrate.ts";
import { createActorPool } from "./actors/pool.ts";
import { createRealtimeHub } from "./realtime/hub.ts";
import { sweepCommitMarks } from "./db/commit_outcome.ts";
import { sweepIdempotencyKeys } from "./db/idempotency_keys.ts";
import { listenForChanges } from "./realtime/listener.ts";
import { createHttpApp } from "./http/app.ts";
import { drainable } from "./http/drain.ts";
import { serveKept } from "./http/kept_server.ts";
import { announce, createThrottledLog, describeError, log, setLogLevel } from "./log.ts";
import type { RecoveryOptions } from "./channels/recover_stored.ts";
import { createSyncedHitCounter } from "./rate_limit/synced_hit_counter.ts";
import { addHits, deleteExpiredWindows } from "./db/rate_limits.ts";
import { createHitCounter } from "./rate_limit/hit_counter.ts";
import { CACHED_ROWS, createConversationListCache } from "./cache/conversation_lists.ts";
import { listConversations } from "./db/conversations.ts";
import { decodeChangeNotice } from "./domain/change_notice.ts";
import type { AppCommand } from "./actors/protocol.ts";
import { createSecretBox } from "./crypto/secret_box.ts";
import { loadEncryptionKey } from "./crypto/encryption_key.ts";
import {
  checkWebhookUrl,
  type Resolver,
  systemResolver,
  UnsafeUrlError,
} from "./webhooks/ssrf_guard.ts";
import { machineAddresses } from "./webhooks/address_policy.ts";
import { parseAllowList } from "./webhooks/allow_list.ts";
import { AppError } from "./domain/app_error.ts";
import { startDeliveryWorkers } from "./webhooks/delivery_worker_host.ts";
import { DEFAULT_SWEEPS, type SweepSchedule } from "./webhooks/delivery_protocol.ts";
import { createMediaLinks } from "./channels/media_links.ts";
import { createWhatsAppInboundProcessor } from "./channels/whatsapp/inbound_processor.ts";
import { createSlackClients } from "./channels/slack/clients.ts";
import { createSlackInboundProcessor } from "./channels/slack/inbound_processor.ts";
import { findActiveApiKey } from "./db/api_keys.ts";
import { sha256Bytes } from "./crypto/tokens.ts";
import { recordPublicBaseUrl } from "./db/public_base_url.ts";

/**
 * How long stopping waits by default for requests in flight (uploads, media downloads) before
 * it stops without them.
 */
export const SHUTDOWN_GRACE_MS = 10_000;

/** A running instance. */
export interface RunningParley {
  /** The port the HTTP server listens on. */
  port: number;
  /** Graceful shutdown; resolves when everything is closed. */
  stop(): Promise<void>;
  /**
   * Settles with the error if the embedded PostgreSQL this instance started exited and could not
   * be started again, or the HTTP listener failed and could not listen again within a minute (the
   * instance then cannot work: stop it and exit non-zero). Never settles otherwise.
   */
  lost: Promise<Error>;
}

/** What tests may replace in an instance. */
export interface StartOptions {
  /** Resolves webhook host names when a url is configured. @default the system's DNS */
  resolveHost?: Resolver;
  /** What the delivery worker resolves these names to instead of asking DNS. @default none */
  deliveryHosts?: Record<string, string[]>;
  /**
   * How long stopping waits for requests in flight before it stops without them, in
   * milliseconds. @default 10_000
   */
  shutdownGraceMs?: number;
  /** When old records are swept. @default DEFAULT_SWEEPS (a minute after start, then hourly) */
  sweeps?: SweepSchedule;
  /** How long the start waits for the database's first answer. @default FIRST_CONTACT_MS */
  firstContactMs?: number;
  /** How long a widget or Open API request may go unanswered. @default REQUEST_DEADLINE_MS */
  requestDeadlineMs?: number;
}

/** Starts an instance with `config`; resolves once it accepts requests. */
export async function startParley(
  config: Config,
  options: StartOptions = {},
): Promise<RunningParley> {
  setLogLevel(config.logLevel);
  const allowPrivate = parseAllowList(config.webhookAllowPrivateHosts);
  if (allowPrivate.names.length + allowPrivate.cidrs.length > 0) {
    log("warn", "WEBHOOK_ALLOW_PRIVATE_HOSTS exempts hosts from the SSRF guard: for testing only", {
      hosts: [...allowPrivate.names, ...allowPrivate.cidrs],
    });
  }
  const encryptionKey = await loadEncryptionKey({
    configured: config.encryptionKey,
    dataDir: config.databaseUrl === null ? config.dataDir : null,
  });
  const secretBox = createSecretBox(encryptionKey);
  let caCerts: string[] | undefined;
  if (config.webhookCaFile) {
    log("warn", "WEBHOOK_CA_FILE adds trusted roots for webhook deliveries: for testing only", {
      file: config.webhookCaFile,
    });
    caCerts = [await Deno.readTextFile(config.webhookCaFile)];
  }
  const resolveHost = options.resolveHost ?? systemResolver;
  const { shutdownGraceMs = SHUTDOWN_GRACE_MS } = options;
  const lost = Promise.withResolvers<Error>();
  const database = await openDatabase(config, lost.resolve);
  const sql = connect(database.url, { max: 10 });
  try {
    await awaitFirstContact(sql, options.firstContactMs);
    const applied = await migrate(sql);
    if (applied.length > 0) log("info", "migrated", { applied });
    await checkEncryptionKey(sql, secretBox);
  } catch (error) {
    // Not waiting for queries: one may be waiting for a database that never answers.
    await sql.end({ timeout: 0 });
    await database.close();
    throw error;
  }
  const pool = await createActorPool({
    size: config.workers,
    databaseUrl: database.url,
    logLevel: config.logLevel,
  });
  const hub = createRealtimeHub({ sql });
  const listings = createConversationListCache({
    load: (appId, status) => listConversations(sql, appId, { status, limit: CACHED_ROWS }),
  });
  const deliveries = await startDeliveryWorkers(config.webhookWorkers, {
    type: "init",
    databaseUrl: database.url,
    encryptionKey,
    allowPrivateHosts: config.webhookAllowPrivateHosts,
    caCerts,
    logLevel: config.logLevel,
    staticHosts: options.deliveryHosts,
    whatsappGraphUrl: config.whatsappGraphUrl,
    slackApiUrl: config.slack.apiUrl,
    sweeps: options.sweeps ?? DEFAULT_SWEEPS,
  });
  const listener = await listenForChanges({
    sql,
    onNotice: (payload) => {
      const notice = decodeChangeNotice(payload);
      // Only commits that queued webhook events wake the deliverers; the slow poll covers the rest.
      if (notice?.w) deliveries.wake();
      for (const appId of notice?.a ?? []) listings.invalidate(appId);
      void hub.handleNotice(payload);
    },
    onReconnect: () => {
      listings.clear();
      void hub.replay();
    },
  });
  // Answers leave after commit; dropping the application's listings first means this instance
  // always reads its own writes, before the change notice even arrives.
  const ask = async (key: string, command: AppCommand) => {
    try {
      return await pool.ask(key, command);
    } finally {
      listings.invalidate(command.appId);
    }
  };
  /** Both counters' failed writes, logged once per 10 s: during an outage every write fails. */
  const countFailed = createThrottledLog(
    "warn",
    "rate-limit count failed; counting in memory",
    10_000,
  );
  const warnCountFailure = (error: unknown) => countFailed(describeError(error));
  // Widget limits are counted in memory and shared through PostgreSQL every 100 ms.
  const widgetHits = createSyncedHitCounter({
    addHits: (hits) => addHits(sql, hits),
    onError: warnCountFailure,
  });
  const mediaLinks = createMediaLinks({ encryptionKey, publicBaseUrl: config.publicBaseUrl });
  const inbound = createWhatsAppInboundProcessor({ sql, ask, mediaLinks });
  const slackClients = createSlackClients(secretBox, config.slack.apiUrl);
  const slackMediaClients = createSlackClients(secretBox, config.slack.apiUrl, {
    rejectRateLimited: true,
  });
  const slackMediaLinks = createMediaLinks({
    encryptionKey,
    publicBaseUrl: config.publicBaseUrl,
    path: "/api/v1/slack/media",
    purpose: "slack",
  });
  const slackInbound = createSlackInboundProcessor({
    sql,
    ask,
    clientFor: slackClients,
    mediaLinks: slackMediaLinks,
  });
  /** The requests that arrived once the stop began: the app refuses them (see drain.ts). */
  const refused = new WeakSet<Request>();
  const app = createHttpApp({
    shuttingDown: (request) => refused.has(request),
    requestDeadlineMs: options.requestDeadlineMs,
    sql,
    ask,
    inbound,
    mediaLinks,
    whatsappGraphUrl: config.whatsappGraphUrl,
    slackInbound,
    slack: config.slack,
    slackMediaLinks,
    slackClients,
    slackMediaClients,
    listings,
    attachVisitor: (socket, who, options) => hub.attachVisitor(socket, who, options),
    hitCounter: widgetHits,
    widgetRateLimit: config.widgetRateLimitPerMinute,
    trustProxy: config.trustProxy,
    findApiKey: (key) => findActiveApiKey(sql, sha256Bytes(key)),
    // Open API limits are exact across instances: every hit is counted in PostgreSQL.
    apiHitCounter: createHitCounter((hits) => addHits(sql, hits), { onError: warnCountFailure }),
    rateLimitPerMinute: config.rateLimitPerMinute,
    publicBaseUrl: config.publicBaseUrl,
    secretBox,
    wakeDeliveries: () => deliveries.wake(),
    async checkWebhookUrl(url) {
      try {
        await checkWebhookUrl(url, {
          resolve: resolveHost,
          allow: allowPrivate,
          own: machineAddresses(),
        });
      } catch (error) {
        if (error instanceof UnsafeUrlError) {
          throw new AppError(400, error.message, { cause: new Error(error.reason) });
        }
        throw error;
      }
    },
  });
  // Ended windows, old commit marks and expired idempotency keys are only clutter; any instance
  // may sweep them.
  const sweep = setInterval(() => {
    deleteExpiredWindows(sql).catch((error) =>
      log("warn", "rate-limit sweep failed", describeError(error))
    );
    sweepCommitMarks(sql).catch((error) =>
      log("warn", "commit mark sweep failed", describeError(error))
    );
    sweepIdempotencyKeys(sql).catch((error) =>
      log("warn", "idempotency key sweep failed", describeError(error))
    );
  }, 60_000);
  // WhatsApp deliveries and Slack requests acknowledged but not applied (a crash came between)
  // are applied again: at start, all those received before it; then every 30 s those left over
  // a minute (another instance may have crashed), one run at a time.
  let recovering: Promise<void> | null = null;
  const recover = (options: RecoveryOptions) => {
    recovering ??= Promise.all([inbound.recover(options), slackInbound.recover(options)]).then(
      () => {},
      (error) => log("warn", "channel recovery failed", describeError(error)),
    ).finally(() => recovering = null);
  };
  const recovery = setInterval(() => recover({}), 30_000);
  // Before listening: live requests wait until this run has handed over what it finds.
  recover({ olderThanSeconds: 0, holdLive: true });

  const requests = drainable(
    (request, info) => app.fetch(request, info),
    (request, info) => {
      refused.add(request);
      return app.fetch(request, info);
    },
  );
  const server = await serveKept({
    port: config.port,
    hostname: "0.0.0.0",
    handler: requests.handler,
    onGiveUp: lost.resolve,
  });
  // For the CLI's links: with no PUBLIC_BASE_URL, the port really listened on (PORT may be 0).
  // Not worth failing a start for: the CLI then falls back to its own configuration.
  await recordPublicBaseUrl(
    sql,
    config.publicBaseUrlSet ? config.publicBaseUrl : `http://localhost:${server.port}`,
    config.publicBaseUrlSet,
  ).catch((error) => log("warn", "could not record the public base URL", describeError(error)));
  announce("listening", {
    port: server.port,
    workers: config.workers,
    database: database.embedded ? "embedded" : "external",
  });

  let stopping: Promise<void> | null = null;
  return {
    port: server.port,
    lost: lost.promise,
    stop() {
      stopping ??= (async () => {
        log("info", "stopping");
        clearInterval(sweep);
        clearInterval(recovery);
        const started = Date.now();
        // Handlers first, then Deno's shutdown, which would cut the bodies still arriving.
        const handled = await requests.drain(shutdownGraceMs);
        const drained = server.shutdown();
        // The last answered requests' frames may still be on their way through LISTEN: the
        // sockets get what was committed before they close (for a second at most).
        let replayTimer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([
          hub.replay(),
          new Promise((resolve) => replayTimer = setTimeout(resolve, 1_000)),
        ]);
        clearTimeout(replayTimer);
        hub.stop();
        // Deno's shutdown can wait forever on a WebSocket whose client left during its upgrade
        // (the socket never opens nor closes): past the grace period, stop without it.
        const grace = Promise.withResolvers<"late">();
        const timer = setTimeout(
          () => grace.resolve("late"),
          Math.max(0, shutdownGraceMs - (Date.now() - started)),
        );
        if (!handled || await Promise.race([drained, grace.promise]) === "late") {
          log("warn", "Some connections did not finish; stopping without them", {
            grace_ms: shutdownGraceMs,
          });
        }
        clearTimeout(timer);
        // Failed channel requests waiting for a retry are left to recovery after the restart.
        inbound.stop();
        slackInbound.stop();
        await listener.stop();
        await widgetHits.stop();
        await pool.stop();
        await deliveries.stop();
        await sql.end({ timeout: 5 });
        await database.close();
        log("info", "stopped");
      })();
      return stopping;
    },
  };
}
