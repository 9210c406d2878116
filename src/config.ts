/**
 * The whole configuration, read once from the environment and validated. Nothing else in
 * Parley reads `Deno.env`.
 */
import { z } from "zod";

/** A whole number written in decimal digits only (no sign, exponent, hex or spaces). */
const digits = z.string().regex(/^[0-9]{1,9}$/, "must be a whole number").transform(Number);
const port = digits.pipe(z.int().min(0).max(65535));
const positive = digits.pipe(z.int().positive());

/**
 * The most threads of one kind: each holds database connections, and PostgreSQL's own limit
 * (600 for the embedded one, which both kinds at their most fit in) would end a start late, after
 * many seconds of silence.
 */
export const MAX_WORKERS = 64;
const workers = digits.pipe(z.int().positive().max(MAX_WORKERS));

/**
 * An absolute URL whose scheme is one of `schemes`, with a host unless `hostOptional`:
 * `z.string().url()` alone takes anything with a colon (`parley.example.com:8080` parses as scheme
 * `parley.example.com`, `javascript:x` too).
 */
function urlWithScheme(schemes: string[], hostOptional = false) {
  const list = schemes.map((scheme) => `${scheme}://`).join(" or ");
  return z.string().refine((value) => {
    try {
      const url = new URL(value);
      // A database's host may be left out (`postgresql:///db`: PGHOST, else localhost) or be a
      // Unix socket directory (`postgresql:///db?host=/run/postgresql`).
      return schemes.includes(url.protocol.slice(0, -1)) && value.includes("://") &&
        (url.host !== "" || hostOptional);
    } catch {
      return false;
    }
  }, `must be an absolute ${list} URL`);
}

const webUrl = urlWithScheme(["https", "http"]);

/** Where Parley is reached: a web origin with an optional path, to which paths are appended. */
const baseUrl = webUrl.refine((value) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return true; // not a URL: said above, and this check still runs
  }
  return url.search === "" && url.hash === "" && !value.includes("?") && !value.includes("#") &&
    url.username === "" && url.password === "";
}, "must have no query, fragment or user name");

const schema = z.object({
  PORT: port.default(8080),
  DATABASE_URL: urlWithScheme(["postgres", "postgresql"], true).optional(),
  DATA_DIR: z.string().min(1).default("./.parley"),
  PUBLIC_BASE_URL: baseUrl.optional(),
  RATE_LIMIT_PER_MINUTE: positive.default(120),
  WIDGET_RATE_LIMIT_PER_MINUTE: positive.default(600),
  WORKERS: workers.optional(),
  WEBHOOK_WORKERS: workers.optional(),
  TRUST_PROXY: z.enum(["0", "1"]).default("0"),
  LOG_LEVEL: z.enum(["debug", "info", "warn", "error", "silent"]).default("info"),
  PARLEY_ENCRYPTION_KEY: z.string().optional(),
  WEBHOOK_ALLOW_PRIVATE_HOSTS: z.string().optional(),
  WEBHOOK_CA_FILE: z.string().optional(),
  WHATSAPP_GRAPH_URL: baseUrl.default("https://graph.facebook.com/v21.0"),
  SLACK_CLIENT_ID: z.string().optional(),
  SLACK_CLIENT_SECRET: z.string().optional(),
  SLACK_SIGNING_SECRET: z.string().optional(),
  SLACK_API_URL: baseUrl.default("https://slack.com/api"),
  SLACK_AUTHORIZE_URL: webUrl.default("https://slack.com/oauth/v2/authorize"),
});

/** Parley's configuration. */
export interface Config {
  port: number;
  /** External database; `null` means the embedded PostgreSQL under {@linkcode dataDir}. */
  databaseUrl: string | null;
  dataDir: string;
  publicBaseUrl: string;
  /** Whether `PUBLIC_BASE_URL` was set (else {@linkcode publicBaseUrl} is `http://localhost:PORT`). */
  publicBaseUrlSet: boolean;
  rateLimitPerMinute: number;
  widgetRateLimitPerMinute: number;
  /** Actor worker threads. */
  workers: number;
  /** Webhook delivery threads. */
  webhookWorkers: number;
  trustProxy: boolean;
  logLevel: "debug" | "info" | "warn" | "error" | "silent";
  /** `PARLEY_ENCRYPTION_KEY` (base64 of 32 bytes); null means the embedded mode's key file. */
  encryptionKey: string | null;
  /** Hosts and CIDRs exempt from the webhook SSRF guard (local testing only); null: none. */
  webhookAllowPrivateHosts: string | null;
  /** A PEM file of extra roots trusted for webhook deliveries (local testing); null: none. */
  webhookCaFile: string | null;
  /** The WhatsApp Cloud (Graph) API base, without a trailing slash. */
  whatsappGraphUrl: string;
  /** The Slack app's OAuth credentials and signing secret; null when Slack is not set up. */
  slack: {
    clientId: string | null;
    clientSecret: string | null;
    signingSecret: string | null;
    /** The Web API base (`SLACK_API_URL`), with a trailing slash: a method's URL is this base and its name. */
    apiUrl: string;
    authorizeUrl: string;
  };
}

/** One thread per CPU, up to {@linkcode MAX_WORKERS}. */
function defaultWorkers(): number {
  return Math.min(navigator.hardwareConcurrency ?? 2, MAX_WORKERS);
}

/** Reads and validates the configuration; throws a readable error on bad values. */
export function loadConfig(env: Record<string, string | undefined> = Deno.env.toObject()): Config {
  const blankless = Object.fromEntries(
    Object.entries(env).filter(([, value]) => value !== undefined && value !== ""),
  );
  const parsed = schema.safeParse(blankless);
  if (!parsed.success) {
    const detail = parsed.error.issues
      .map((issue) => `${issue.path.join(".")}: ${issue.message}`)
      .join("; ");
    throw new Error(`Invalid configuration: ${detail}`);
  }
  const values = parsed.data;
  return {
    port: values.PORT,
    databaseUrl: values.DATABASE_URL ?? null,
    dataDir: values.DATA_DIR,
    publicBaseUrl: (values.PUBLIC_BASE_URL ?? `http://localhost:${values.PORT}`).replace(/\/$/, ""),
    publicBaseUrlSet: values.PUBLIC_BASE_URL !== undefined,
    rateLimitPerMinute: values.RATE_LIMIT_PER_MINUTE,
    widgetRateLimitPerMinute: values.WIDGET_RATE_LIMIT_PER_MINUTE,
    workers: values.WORKERS ?? defaultWorkers(),
    webhookWorkers: values.WEBHOOK_WORKERS ?? defaultWorkers(),
    trustProxy: values.TRUST_PROXY === "1",
    logLevel: values.LOG_LEVEL,
    encryptionKey: values.PARLEY_ENCRYPTION_KEY ?? null,
    webhookAllowPrivateHosts: values.WEBHOOK_ALLOW_PRIVATE_HOSTS ?? null,
    webhookCaFile: values.WEBHOOK_CA_FILE ?? null,
    whatsappGraphUrl: values.WHATSAPP_GRAPH_URL.replace(/\/$/, ""),
    slack: {
      clientId: values.SLACK_CLIENT_ID ?? null,
      clientSecret: values.SLACK_CLIENT_SECRET ?? null,
      signingSecret: values.SLACK_SIGNING_SECRET ?? null,
      apiUrl: values.SLACK_API_URL.replace(/\/?$/, "/"),
      authorizeUrl: values.SLACK_AUTHORIZE_URL,
    },
  };
}
