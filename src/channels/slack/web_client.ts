/**
 * The one place Parley calls Slack's Web API and reads its errors (CONTRACT §6.2): the eight
 * methods it uses, each POSTed form-encoded to `<SLACK_API_URL><method>` with the token as
 * `Authorization: Bearer`, exactly as the official `@slack/web-api` client sends them (objects
 * such as `blocks` as JSON text, absent values left out). Pointed at `SLACK_API_URL` it talks to
 * Slack or to the fake in tests alike.
 *
 * It is written on `fetch` rather than with the official client, whose types it keeps: that
 * client reaches `axios` → `form-data` → `get-intrinsic`, which `require()`s an ES module, and
 * Deno's path for that wedged a whole process on CI when several threads loaded it at once
 * (docs/architecture.md § Tests).
 *
 * By default a client honours Slack's rate limits itself: on HTTP 429 it holds back every call of
 * that method by that client for `Retry-After` seconds (Slack limits each method of a workspace
 * apart: a `files.info` limited must not hold the `users.info` of an agent's reply) and tries
 * again. With `rejectRateLimited` (the mirror's
 * sends, which hold a lease) it throws at once instead, and the caller waits. It retries other
 * HTTP failures and network failures a few times, so that a call waits a little rather than fails
 * at once — but not a post, which Slack may have made whatever went wrong after it was sent; the
 * callers' own outboxes keep the longer retries and their state in the database.
 */
import type {
  AuthTestResponse,
  ChatPostMessageArguments,
  ChatPostMessageResponse,
  ChatUpdateArguments,
  ChatUpdateResponse,
  ConversationsHistoryArguments,
  ConversationsHistoryResponse,
  ConversationsJoinArguments,
  ConversationsJoinResponse,
  FilesInfoArguments,
  FilesInfoResponse,
  OAuthV2AccessArguments,
  OauthV2AccessResponse,
  UsersInfoArguments,
  UsersInfoResponse,
} from "@slack/web-api";

/** Retries within one call after its first attempt; longer outages are the outbox's to retry. */
const RETRIES = 2;
/**
 * Methods repeated only after a 429 (which says Slack did nothing): after a cut answer, a timeout
 * or an error status a post may well have been made, and repeating it at once would show it twice
 * in the thread. Their caller's outbox decides about a later try (and, for a conversation's root,
 * looks for it first).
 */
const REPEATED_ONLY_WHEN_RATE_LIMITED = new Set(["chat.postMessage"]);
/** The wait before the first retry of an HTTP or network failure; it doubles for the next. */
const FIRST_RETRY_DELAY_MS = 500;
/** A call that hangs this long is abandoned and counts as a network failure. */
const TIMEOUT_MS = 10_000;
/** Sent with every call: Slack asks API clients to name themselves. */
const USER_AGENT = "Parley";

/** The Web API methods Parley calls, with the official client's argument and answer types. */
export interface SlackWebClient {
  chat: {
    postMessage(args: ChatPostMessageArguments): Promise<ChatPostMessageResponse>;
    update(args: ChatUpdateArguments): Promise<ChatUpdateResponse>;
  };
  users: { info(args: UsersInfoArguments): Promise<UsersInfoResponse> };
  files: { info(args: FilesInfoArguments): Promise<FilesInfoResponse> };
  auth: { test(): Promise<AuthTestResponse> };
  conversations: {
    join(args: ConversationsJoinArguments): Promise<ConversationsJoinResponse>;
    history(args: ConversationsHistoryArguments): Promise<ConversationsHistoryResponse>;
  };
  oauth: { v2: { access(args: OAuthV2AccessArguments): Promise<OauthV2AccessResponse> } };
}

/** What Parley needs to know of a failed Web API call. */
export interface SlackErrorInfo {
  /**
   * Slack's error code for a refused call (`channel_not_found`, `invalid_auth`, …),
   * `ratelimited` when Slack answered 429, `http_error` for another HTTP status or an answer that
   * is not Slack's JSON, `request_error` when Slack could not be reached or did not answer in
   * time, `unknown_error` for anything else.
   */
  code: string;
  /** How long Slack asked to wait before trying again, when it said; else null. */
  retryAfterMs: number | null;
}

/** A failed Web API call: what {@linkcode slackErrorOf} reads. */
export class SlackCallError extends Error {
  /** The failure in Parley's terms. */
  readonly info: SlackErrorInfo;
  /** Slack had begun to answer 200 when the call failed: it most likely acted. */
  readonly answered: boolean;

  /** A failure of `method` described by `info`. */
  constructor(
    method: string,
    info: SlackErrorInfo,
    options?: ErrorOptions & { answered?: boolean },
  ) {
    const wait = info.retryAfterMs === null ? "" : ` (retry after ${info.retryAfterMs} ms)`;
    super(`Slack ${method}: ${info.code}${wait}`, options);
    this.name = "SlackCallError";
    this.info = info;
    this.answered = options?.answered ?? false;
  }
}

/** Options of {@linkcode createSlackWebClient}. */
export interface SlackWebClientOptions {
  /**
   * Reject a 429 at once (`ratelimited`, with its `Retry-After`) rather than wait it out inside
   * the call: for callers that hold a lease, which a wait as long as Slack asks could outlast.
   * @default false
   */
  rejectRateLimited?: boolean;
  /** How long one attempt may take. @default 10_000 */
  timeoutMs?: number;
  /** Retries after the first attempt. @default 2 */
  retries?: number;
}

/** `value` in Unix seconds' text as Slack's `Retry-After` gives it, in milliseconds; else null. */
function retryAfterMsOf(value: string | null): number | null {
  if (value === null || !/^\s*\d+\s*$/.test(value)) return null;
  return Number.parseInt(value, 10) * 1000;
}

/**
 * The method's parameters form-encoded as the official client encodes them: strings as they are,
 * numbers and booleans as text, anything else as JSON; `undefined` and `null` left out.
 */
export function encodeSlackParams(params: object): URLSearchParams {
  const form = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    const text = typeof value === "string"
      ? value
      : typeof value === "number" || typeof value === "boolean"
      ? String(value)
      : JSON.stringify(value);
    form.append(name, text);
  }
  return form;
}

/** Resolves after `ms` milliseconds. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * A Web API client for `token` (none for `oauth.v2.access`) that sends to `apiUrl`
 * (`SLACK_API_URL`, with its trailing slash, e.g. `https://slack.com/api/`). Make one per token
 * and reuse it: a 429 holds back that client's later calls of the method too, as Slack rate-limits
 * each method of a workspace.
 */
export function createSlackWebClient(
  token: string | undefined,
  apiUrl: string,
  options: SlackWebClientOptions = {},
): SlackWebClient {
  const retries = options.retries ?? RETRIES;
  const timeoutMs = options.timeoutMs ?? TIMEOUT_MS;
  /** Until when (epoch ms) calls of a method wait, after a 429 told this client to. */
  const heldUntil = new Map<string, number>();

  /** One attempt: Slack's answer, or the failure it amounts to. */
  async function attempt(method: string, body: URLSearchParams): Promise<Record<string, unknown>> {
    let response: Response;
    try {
      response = await fetch(`${apiUrl}${method}`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          "user-agent": USER_AGENT,
          ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        },
        body,
        signal: AbortSignal.timeout(timeoutMs),
        // Slack's methods answer where they are asked; a redirect would go on without the token.
        redirect: "manual",
      });
    } catch (error) {
      throw new SlackCallError(method, { code: "request_error", retryAfterMs: null }, {
        cause: error,
      });
    }
    const retryAfterMs = retryAfterMsOf(response.headers.get("retry-after"));
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      // Only an answer that began with 200 says Slack acted (a 429's or a 5xx's did not).
      throw new SlackCallError(method, { code: "request_error", retryAfterMs: null }, {
        cause: error,
        answered: response.status === 200,
      });
    }
    if (response.status === 429) {
      throw new SlackCallError(method, { code: "ratelimited", retryAfterMs });
    }
    if (response.status !== 200) {
      throw new SlackCallError(method, { code: "http_error", retryAfterMs });
    }
    let result: unknown;
    try {
      result = JSON.parse(text);
    } catch {
      throw new SlackCallError(method, { code: "http_error", retryAfterMs });
    }
    if (typeof result !== "object" || result === null || Array.isArray(result)) {
      throw new SlackCallError(method, { code: "http_error", retryAfterMs });
    }
    const answer = result as Record<string, unknown>;
    if (answer.ok !== true) {
      const code = typeof answer.error === "string" ? answer.error : "platform_error";
      throw new SlackCallError(method, { code, retryAfterMs });
    }
    return answer;
  }

  /** Calls `method`, retrying as the module's comment says. */
  async function call<T>(method: string, params: object): Promise<T> {
    const body = encodeSlackParams(params);
    for (let tries = 0;; tries++) {
      const held = (heldUntil.get(method) ?? 0) - Date.now();
      if (held > 0) await sleep(held);
      try {
        return await attempt(method, body) as T;
      } catch (error) {
        if (!(error instanceof SlackCallError)) throw error;
        const { code, retryAfterMs } = error.info;
        const holds = code === "ratelimited" && !options.rejectRateLimited && retryAfterMs !== null;
        // The method's other calls wait as Slack asked, also after this call's last attempt.
        if (holds) {
          heldUntil.set(method, Math.max(heldUntil.get(method) ?? 0, Date.now() + retryAfterMs));
        }
        if (tries >= retries) throw error;
        if (code !== "ratelimited" && REPEATED_ONLY_WHEN_RATE_LIMITED.has(method)) throw error;
        if (code === "ratelimited") {
          // Without a usable Retry-After there is no telling how long to wait: the caller decides.
          if (!holds) throw error;
        } else if (code === "http_error" || code === "request_error") {
          await sleep(FIRST_RETRY_DELAY_MS * 2 ** tries);
        } else {
          throw error;
        }
      }
    }
  }

  return {
    chat: {
      postMessage: (args) => call("chat.postMessage", args),
      update: (args) => call("chat.update", args),
    },
    users: { info: (args) => call("users.info", args) },
    files: { info: (args) => call("files.info", args) },
    auth: { test: () => call("auth.test", {}) },
    conversations: {
      join: (args) => call("conversations.join", args),
      history: (args) => call("conversations.history", args),
    },
    oauth: { v2: { access: (args) => call("oauth.v2.access", args) } },
  };
}

/**
 * What a failed call amounts to: a {@linkcode SlackCallError}'s code and `Retry-After`;
 * `unknown_error` for anything else.
 */
export function slackErrorOf(error: unknown): SlackErrorInfo {
  if (error instanceof SlackCallError) return error.info;
  return { code: "unknown_error", retryAfterMs: null };
}
