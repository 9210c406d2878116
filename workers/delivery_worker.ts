/**
 * The entry point of the webhook delivery thread: it owns a small database pool and one delivery
 * loop (`src/webhooks/delivery_loop.ts`), attempting deliveries off the request path. The main
 * thread wakes it when a commit may have queued an event.
 */
/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />
import { connectWorkerPool, type Sql, warmUp } from "../src/db/client.ts";
import {
  claimDeliveryRound,
  type ClaimedDelivery,
  deleteOldAttempts,
  recordAttempts,
} from "../src/db/deliveries.ts";
import { roundRobin } from "../src/webhooks/round_robin_claim.ts";
import { createAttemptRecorder } from "../src/webhooks/attempt_recorder.ts";
import { createSecretBox, type SecretBox } from "../src/crypto/secret_box.ts";
import { createLruCache } from "../src/cache/lru_cache.ts";
import { createDeliveryLoop, type DeliveryLoop } from "../src/webhooks/delivery_loop.ts";
import { attemptDelivery } from "../src/webhooks/deliver.ts";
import { createConnectionPool, postPinned } from "../src/webhooks/pinned_https.ts";
import { checkWebhookUrl, type Resolver, systemResolver } from "../src/webhooks/ssrf_guard.ts";
import { machineAddresses } from "../src/webhooks/address_policy.ts";
import { parseAllowList } from "../src/webhooks/allow_list.ts";
import type { DeliveryWorkerMessage } from "../src/webhooks/delivery_protocol.ts";
import {
  claimChannelSends,
  type ClaimedSend,
  recordSendOutcome,
  recordSentPart,
} from "../src/db/channel_sends.ts";
import { markWhatsAppChannelAttention } from "../src/db/whatsapp_channels.ts";
import { sendToWhatsApp } from "../src/channels/whatsapp/sender.ts";
import {
  type ClaimedMirror,
  claimMirrorSends,
  forgetRootAttempt,
  noteRootAttempt,
  noteRootSearched,
  pauseSlackWorkspace,
  recordMirrorOutcome,
  saveMirroredParts,
  saveThread,
} from "../src/db/slack_sends.ts";
import { createSlackClients } from "../src/channels/slack/clients.ts";
import { sweepChannelRecords } from "../src/db/channel_sweep.ts";
import { applyEarlyWhatsAppStatuses } from "../src/db/whatsapp_inbound.ts";
import { sendMirror } from "../src/channels/slack/mirror.ts";
import { createThrottledLog, describeError, log, setLogLevel } from "../src/log.ts";
import { guardWorkerThread } from "../src/thread_guards.ts";
import { createLeaseKeeper, type LeaseKeeper } from "../src/channels/lease_keeper.ts";
import { renewChannelClaims } from "../src/db/channel_claims.ts";
import { retryingTransient } from "../src/db/transient_retry.ts";

/** Seconds a claimed delivery stays with this worker before another may take it. */
const LEASE_SECONDS = 60;
/**
 * The same for channel sends, renewed every `SEND_LEASE_RENEWAL_MS` while the send goes on (a
 * carousel is many posts, each with its timeout): a send must never outlast its lease and go out
 * twice, and the sends of a crashed sender come back after it (10 minutes, unrenewed, held a
 * crashed instance's conversations that long).
 */
const SEND_LEASE_SECONDS = 120;
const SEND_LEASE_RENEWAL_MS = 20_000;
/**
 * How long the record of what a send or an attempt did is tried again while the database is away
 * (see transient_retry.ts): inside the lease, which cannot be renewed meanwhile, so the claim is
 * still this worker's; a failed renewal is tried again every second, so the lease is renewed as
 * soon as the database is back.
 */
const SEND_RECORD_RETRY_MS = 90_000;
const ATTEMPT_RECORD_RETRY_MS = 30_000;

let sql: Sql | null = null;
let loop: DeliveryLoop | null = null;
/** The WhatsApp sender: channel sends come from the same outbox. */
let sender: DeliveryLoop | null = null;
/** Renews the leases of the channel sends in progress. */
let keeper: LeaseKeeper<unknown> | null = null;
/** The Slack mirror's sender. */
let mirror: DeliveryLoop | null = null;
let sweep: ReturnType<typeof setInterval> | undefined;
let firstSweep: ReturnType<typeof setTimeout> | undefined;
/** Keep-alive connections to receivers, shared by every attempt of this worker. */
const connections = createConnectionPool();

guardWorkerThread("delivery");

self.onmessage = async (event: MessageEvent<DeliveryWorkerMessage>) => {
  const message = event.data;
  switch (message.type) {
    case "init": {
      setLogLevel(message.logLevel);
      const pool = connectWorkerPool(message.databaseUrl, "parley-delivery");
      sql = pool;
      await warmUp(pool);
      const secretBox = openingOnce(createSecretBox(message.encryptionKey));
      const recorder = createAttemptRecorder((records) =>
        retryingTransient(() => recordAttempts(pool, records), ATTEMPT_RECORD_RETRY_MS)
      );
      const allow = parseAllowList(message.allowPrivateHosts);
      const staticHosts = message.staticHosts ?? {};
      const resolve: Resolver = (name) =>
        staticHosts[name] ? Promise.resolve(staticHosts[name]) : systemResolver(name);
      loop = createDeliveryLoop({
        claim: roundRobin<ClaimedDelivery>((limit, room, after) =>
          claimDeliveryRound(pool, { limit, leaseSeconds: LEASE_SECONDS, room, after })
        ),
        keyOf: (delivery) => delivery.appId,
        attempt: (delivery) =>
          attemptDelivery({
            record: (record) => recorder.record(record),
            secretBox,
            checkUrl: (url) => checkWebhookUrl(url, { resolve, allow, own: machineAddresses() }),
            post: (request) => postPinned({ ...request, pool: connections }),
            caCerts: message.caCerts,
          }, delivery),
        dueAgainInMs: (outcome) => outcome.state === "pending" ? outcome.retryInMs : null,
        onError: (error) => log("error", "webhook delivery failed", describeError(error)),
      });
      const renewalFailed = createThrottledLog("warn", "channel lease renewal failed", 10_000);
      const leases = createLeaseKeeper<{ appId: number; id: number; claimedAt: string }>({
        renew: (claims) => renewChannelClaims(pool, claims, SEND_LEASE_SECONDS),
        everyMs: SEND_LEASE_RENEWAL_MS,
        // Tried again every second while it fails: a line every 10 s says enough.
        onError: (error) => renewalFailed(describeError(error)),
      });
      keeper = leases;
      sender = createDeliveryLoop({
        claim: roundRobin<ClaimedSend>((limit, room, after) =>
          claimChannelSends(pool, {
            kind: "whatsapp",
            limit,
            leaseSeconds: SEND_LEASE_SECONDS,
            room,
            after,
          })
        ),
        keyOf: (send) => send.appId,
        attempt: (send) =>
          leases.holding(send, () =>
            sendToWhatsApp({
              graphUrl: message.whatsappGraphUrl,
              openSecret: (sealed) => secretBox.open(sealed),
              recordPart: (claimed, part, wamid) =>
                recorded(async () => {
                  const waiting = await recordSentPart(
                    pool,
                    {
                      appId: claimed.appId,
                      chatId: claimed.message!.chatId,
                      messageId: claimed.message!.id,
                    },
                    part,
                    wamid,
                  );
                  // Receipts that beat the send's answer apply now.
                  if (waiting && wamid !== null) {
                    await applyEarlyWhatsAppStatuses(pool, {
                      appId: claimed.appId,
                      wamids: [wamid],
                    });
                  }
                }),
              recordOutcome: (claimed, outcome) =>
                recorded(() =>
                  recordSendOutcome(
                    pool,
                    {
                      ...claimed,
                      messageId: claimed.message?.id ?? null,
                      chatId: claimed.message?.chatId ?? null,
                    },
                    outcome,
                  )
                ),
              markAttention: (appId, reason) =>
                recorded(() => markWhatsAppChannelAttention(pool, appId, reason)),
            }, send)),
        onError: (error) => log("error", "whatsapp send failed", describeError(error)),
        // A customer's sends go one at a time: each one's end lets the next be claimed.
        ordered: true,
        batchSize: 16,
      });
      // The mirror's sends hold a lease: a 429 goes back to the outbox with its Retry-After.
      const slackClients = createSlackClients(secretBox, message.slackApiUrl, {
        rejectRateLimited: true,
      });
      mirror = createDeliveryLoop({
        claim: roundRobin<ClaimedMirror>((limit, room, after) =>
          claimMirrorSends(pool, { limit, leaseSeconds: SEND_LEASE_SECONDS, room, after })
        ),
        keyOf: (send) => send.appId,
        attempt: (send) =>
          leases.holding(send, () =>
            sendMirror({
              clientFor: slackClients,
              saveThread: (thread) => recorded(() => saveThread(pool, thread)),
              noteRootAttempt: (root) => recorded(() => noteRootAttempt(pool, root)),
              forgetRootAttempt: (root) => recorded(() => forgetRootAttempt(pool, root)),
              noteRootSearched: (root, ts) => recorded(() => noteRootSearched(pool, root, ts)),
              saveMirrored: (link) => recorded(() => saveMirroredParts(pool, link)),
              record: (claimed, outcome, error) =>
                recorded(() => recordMirrorOutcome(pool, claimed, outcome, error)),
              pauseWorkspace: (teamId, waitMs) =>
                recorded(() => pauseSlackWorkspace(pool, teamId, waitMs)),
            }, send)),
        onError: (error) => log("error", "slack mirror failed", describeError(error)),
        // A conversation's posts go one at a time: each one's end lets the next be claimed.
        ordered: true,
        batchSize: 16,
      });
      // Attempts are kept 14 days; any instance may sweep them (see DEFAULT_SWEEPS).
      if (message.sweeps) {
        const sweepOnce = () => {
          deleteOldAttempts(pool).catch((error) =>
            log("warn", "delivery log sweep failed", describeError(error))
          );
          sweepChannelRecords(pool).catch((error) =>
            log("warn", "channel sweep failed", describeError(error))
          );
          // A receipt whose transaction committed just after its send's record looked for it.
          applyEarlyWhatsAppStatuses(pool).catch((error) =>
            log("warn", "early receipts sweep failed", describeError(error))
          );
        };
        firstSweep = setTimeout(sweepOnce, message.sweeps.firstInMs);
        sweep = setInterval(sweepOnce, message.sweeps.everyMs);
      }
      self.postMessage({ type: "ready" });
      break;
    }
    case "wake":
      loop?.wake();
      sender?.wake();
      mirror?.wake();
      break;
    case "stop":
      clearTimeout(firstSweep);
      clearInterval(sweep);
      await Promise.all([loop?.stop(), sender?.stop(), mirror?.stop()]);
      await keeper?.stop();
      connections.close();
      await sql?.end();
      self.postMessage({ type: "stopped" });
      break;
  }
};

/**
 * The box with its openings remembered: every attempt needs its application's secret, and an
 * AES-GCM opening costs more than signing the delivery. A sealed value never changes meaning,
 * so remembering it cannot go stale; the plaintext stays in this worker's memory only.
 */
function openingOnce(box: SecretBox): SecretBox {
  const opened = createLruCache<string, string>(10_000);
  return {
    seal: (plaintext) => box.seal(plaintext),
    open(sealed) {
      let plaintext = opened.get(sealed);
      if (plaintext === undefined) {
        plaintext = box.open(sealed);
        opened.set(sealed, plaintext);
      }
      return plaintext;
    },
  };
}

/** A channel send's record of what the platform did, tried again while the database is away. */
function recorded<T>(write: () => Promise<T>): Promise<T> {
  return retryingTransient(write, SEND_RECORD_RETRY_MS);
}
