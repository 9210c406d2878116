/** The plain data the main thread sends the delivery worker, and the worker's answers. */
import type { LogLevel } from "../log.ts";

/** Main thread → delivery worker. */
export type DeliveryWorkerMessage =
  | {
    type: "init";
    databaseUrl: string;
    /** The secret box's 32-byte key. */
    encryptionKey: Uint8Array;
    /** WEBHOOK_ALLOW_PRIVATE_HOSTS, as configured. */
    allowPrivateHosts: string | null;
    /** Extra trusted PEM roots (WEBHOOK_CA_FILE). */
    caCerts?: string[];
    logLevel: LogLevel | "silent";
    /** Answers for these names instead of DNS (a test seam: a resolver cannot cross threads). */
    staticHosts?: Record<string, string[]>;
    /** The WhatsApp Cloud API base (WHATSAPP_GRAPH_URL): this worker also sends to WhatsApp. */
    whatsappGraphUrl: string;
    /** The Slack Web API base (SLACK_API_URL): this worker also mirrors to Slack. */
    slackApiUrl: string;
    /** When this worker sweeps old attempts and channel records (one worker per instance does). */
    sweeps: SweepSchedule | null;
  }
  | { type: "wake" }
  | { type: "stop" };

/** When the sweeps of old records run: once `firstInMs` after start, then every `everyMs`. */
export interface SweepSchedule {
  firstInMs: number;
  everyMs: number;
}

/**
 * A minute after start (an instance restarted more often than hourly would never sweep), then
 * every hour.
 */
export const DEFAULT_SWEEPS: SweepSchedule = { firstInMs: 60_000, everyMs: 3_600_000 };

/** Delivery worker → main thread. */
export type DeliveryWorkerReply = { type: "ready" } | { type: "stopped" };
