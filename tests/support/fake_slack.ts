/**
 * A local stand-in for Slack in integration tests: a real HTTP server on loopback that speaks
 * Slack's formats. Its Web API (`/api/<method>`; query, form or JSON parameters; the token as
 * `Authorization: Bearer` or a `token` parameter) answers as Slack does — HTTP 200 with `"ok":
 * false` and an error code when it refuses, a queued 429 with `Retry-After` as given — and records
 * every call. Only bot tokens issued by exchanging a code (`issueCode` → `oauth.v2.access`) are
 * known: any other is `invalid_auth`, none `not_authed`; OAuth refusals are Slack's documented
 * codes (`invalid_client_id`, `bad_client_secret`, `invalid_code`, `code_already_used`,
 * `bad_redirect_uri`). `url_private` without a known bot token answers 403 (Slack serves its
 * sign-in page instead) so that a forgotten token is plain to see. The other way round, it signs
 * Events API and interactivity requests with the app's signing secret and sends them to Parley.
 */
import { slackSignature } from "../../src/channels/slack/signature.ts";

/** One Web API call the fake received. */
export interface SlackCall {
  /** The method, e.g. `chat.postMessage`. */
  method: string;
  /** The Bearer token or `token` parameter; null when none was sent. */
  token: string | null;
  /** Query, form or JSON parameters (the token left out); JSON-valued form fields parsed. */
  params: Record<string, unknown>;
}

/** An answer to queue: the status (default 200), the body (JSON unless a string), extra headers. */
export interface FakeSlackResponse {
  status?: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** A member of the workspace, for `users.info`. */
export interface FakeSlackUser {
  id: string;
  displayName: string;
  /** @default displayName */
  realName?: string;
  /** Their home workspace. @default the installation's */
  teamId?: string;
  /** Their Enterprise Grid organisation: `users.info` then describes an `enterprise_user`. */
  enterpriseId?: string;
}

/** A running fake Slack; disposing of it stops the server. */
export interface FakeSlack extends AsyncDisposable {
  /** The Web API base with a trailing slash, e.g. `http://127.0.0.1:PORT/api/` (`SLACK_API_URL`). */
  apiUrl: string;
  /** The consent screen, e.g. `http://127.0.0.1:PORT/oauth/v2/authorize`: a small HTML page. */
  authorizeUrl: string;
  /** Every Web API call, in the order received. */
  calls: SlackCall[];
  /** Queues answers for the next calls of `method` (first in, first out), before any check. */
  queue(method: string, ...responses: FakeSlackResponse[]): void;
  /**
   * A code that `oauth.v2.access` exchanges once, given this app's client id and secret (as
   * parameters or HTTP Basic) and, when `redirectUri` is set, the same `redirect_uri`.
   */
  issueCode(install?: FakeSlackInstall): string;
  /**
   * The next `count` calls of `method` that pass the fake's checks act, then their answer breaks
   * off after HTTP 200 and a few bytes of its body (a connection cut partway).
   */
  cutAnswers(method: string, count?: number): void;
  /** Adds a member that `users.info` describes; otherwise it answers `user_not_found`. */
  addUser(user: FakeSlackUser): void;
  /**
   * `files.info` answers with `url_private` on this server (or `urlPrivate`, to play a file
   * elsewhere); downloading it needs `Authorization: Bearer <bot token>`.
   */
  addFile(
    file: { id: string; name: string; mimetype: string; bytes: Uint8Array; urlPrivate?: string },
  ): void;
  /**
   * Sends a signed JSON request to Parley (e.g. `${baseUrl}/api/v1/slack/events`) as the Events
   * API does; `retryNum` marks it as a redelivery (`X-Slack-Retry-Num`, reason `http_timeout`).
   */
  postEvent(
    url: string,
    body: unknown,
    options?: FakeSlackSigning & { retryNum?: number },
  ): Promise<Response>;
  /** Sends a signed `application/x-www-form-urlencoded` `payload=<json>` request (interactivity). */
  postAction(url: string, payload: unknown, options?: FakeSlackSigning): Promise<Response>;
}

/**
 * The workspace an issued code installs into. Defaults: team `T00000001` "Fake Workspace", channel
 * `C00000001` (the one picked on the consent screen), bot user `U0BOT0001`, bot `B0BOT0001`, a
 * fresh `xoxb-` token, and any `redirect_uri` (when set, the exchange must send the same).
 */
export interface FakeSlackInstall {
  teamId?: string;
  teamName?: string;
  channelId?: string;
  botToken?: string;
  botUserId?: string;
  botId?: string;
  redirectUri?: string;
  /** The Enterprise Grid organisation of the workspace. @default null */
  enterprise?: { id: string; name: string } | null;
}

/**
 * How a request to Parley is signed, to forge or age it: another secret (default the app's), a
 * `timestamp` in Unix seconds (default now), a `signature` sent as it is (null: no header).
 */
export interface FakeSlackSigning {
  signingSecret?: string;
  timestamp?: number;
  signature?: string | null;
}

/** The Slack app the fake plays: its OAuth credentials and signing secret. */
export interface FakeSlackOptions {
  clientId: string;
  clientSecret: string;
  signingSecret: string;
}

/** One workspace install, as a code promises it and its bot token then carries it. */
type Install = Required<Omit<FakeSlackInstall, "redirectUri">> & { redirectUri?: string };
type Params = Record<string, unknown>;

const APP_ID = "A0PARLEY01";
const SCOPES = "chat:write,chat:write.customize,channels:history,groups:history,channels:join," +
  "users:read,users:read.email,files:read,incoming-webhook";
const FILE_PATH = /^\/files-pri\/[A-Z0-9]+-([^/]+)\/(?:download\/)?[^/]+$/;
const CONSENT_PAGE = "<!doctype html><title>Install Parley</title><h1>Fake Slack</h1>";

/** A Web API answer: JSON (a string body as it is), HTTP 200 unless told. */
function reply(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  const type = { "content-type": "application/json; charset=utf-8" };
  return new Response(text, { status, headers: { ...type, ...headers } });
}

/** Slack's refusal: HTTP 200 with `"ok": false`. */
const refuse = (error: string) => reply({ ok: false, error });
/** `value` when it is a string, else "". */
const str = (value: unknown) => (typeof value === "string" ? value : "");
/** `fields` without its undefined values. */
const defined = (fields: Params) =>
  Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
/** Random lowercase hex, 32 digits at most. */
const hex = (digits: number) => crypto.randomUUID().replaceAll("-", "").slice(0, digits);

/** A form or query value, parsed when it is a JSON object or array (`blocks`, `attachments`). */
function formValue(value: string): unknown {
  try {
    return /^\s*[[{]/.test(value) ? JSON.parse(value) : value;
  } catch {
    return value;
  }
}

/** The parameters of a Web API request: its query, then its JSON or form body. */
async function readParams(request: Request, url: URL): Promise<Params> {
  const params: Params = {};
  for (const [name, value] of url.searchParams) params[name] = formValue(value);
  const type = request.headers.get("content-type") ?? "";
  const text = await request.text();
  if (type.includes("application/json") && text !== "") return { ...params, ...JSON.parse(text) };
  if (!type.includes("application/x-www-form-urlencoded")) return params;
  for (const [name, value] of new URLSearchParams(text)) params[name] = formValue(value);
  return params;
}

/** The credentials of the `Authorization` header with `scheme`, or null. */
function credentialOf(request: Request, scheme: "Bearer" | "Basic"): string | null {
  const pattern = new RegExp(`^${scheme}\\s+(\\S+)$`, "i");
  return pattern.exec(request.headers.get("authorization") ?? "")?.[1] ?? null;
}

/** The client id and secret of `Authorization: Basic`, else of the parameters. */
function clientOf(request: Request, params: Params): [unknown, unknown] {
  const basic = credentialOf(request, "Basic");
  if (basic === null) return [params.client_id, params.client_secret];
  const decoded = atob(basic);
  return [decoded.slice(0, decoded.indexOf(":")), decoded.slice(decoded.indexOf(":") + 1)];
}

/** `answer` with its status and headers, whose body breaks off after its first bytes. */
async function cutShort(answer: Response): Promise<Response> {
  const whole = new Uint8Array(await answer.arrayBuffer());
  // The length promised is the whole answer's; the connection ends after 8 bytes of it.
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(whole.subarray(0, 8));
      controller.close();
    },
  });
  const headers = new Headers(answer.headers);
  headers.set("content-length", String(whole.length));
  return new Response(body, { status: answer.status, headers });
}

/** Starts a fake Slack on `127.0.0.1` and a free port. */
export function startFakeSlack(options: FakeSlackOptions): Promise<FakeSlack> {
  const calls: SlackCall[] = [];
  const queues = new Map<string, FakeSlackResponse[]>();
  const codes = new Map<string, Install & { used: boolean }>();
  const tokens = new Map<string, Install>();
  const joined = new Set<string>();
  const messages = new Map<string, string>();
  /** How many of the next calls of a method have their answer cut after acting. */
  const cuts = new Map<string, number>();
  /** Each channel's top-level posts, oldest first, as `conversations.history` lists them. */
  const history = new Map<string, Params[]>();
  const users = new Map<string, FakeSlackUser>();
  const files = new Map<
    string,
    { name: string; mimetype: string; bytes: Uint8Array; urlPrivate?: string }
  >();
  const epoch = Math.floor(Date.now() / 1000);
  let serial = 0;

  /** A message ts never given before, increasing: `<seconds>.<6 digits>`. */
  const nextTs = () => {
    serial += 100;
    return `${epoch + Math.floor(serial / 1e6)}.${String(serial % 1e6).padStart(6, "0")}`;
  };

  const exchange = (request: Request, params: Params): Response => {
    const [clientId, clientSecret] = clientOf(request, params);
    if (clientId !== options.clientId) return refuse("invalid_client_id");
    if (clientSecret !== options.clientSecret) return refuse("bad_client_secret");
    const install = codes.get(str(params.code));
    if (install === undefined) return refuse("invalid_code");
    if (install.used) return refuse("code_already_used");
    const { teamId, teamName, channelId, botToken, botUserId, botId, redirectUri, enterprise } =
      install;
    if (redirectUri !== undefined && params.redirect_uri !== redirectUri) {
      return refuse("bad_redirect_uri");
    }
    install.used = true;
    tokens.set(botToken, install);
    const incoming_webhook = {
      channel: `#${channelId.toLowerCase()}`,
      channel_id: channelId,
      configuration_url: `https://${teamId.toLowerCase()}.slack.com/services/${botId}`,
      url: `https://hooks.slack.com/services/${teamId}/${botId}/${hex(24)}`,
    };
    return reply({
      ok: true,
      app_id: APP_ID,
      authed_user: { id: "U0INSTALLER" },
      scope: SCOPES,
      token_type: "bot",
      access_token: botToken,
      bot_user_id: botUserId,
      team: { id: teamId, name: teamName },
      enterprise,
      is_enterprise_install: false,
      incoming_webhook,
    });
  };

  /** The methods that need a bot token, by name. */
  const methods: Record<string, (params: Params, install: Install) => Response> = {
    "auth.test": (_, { teamId, teamName, botUserId, botId }) =>
      reply({
        ok: true,
        url: `https://${teamId.toLowerCase()}.slack.com/`,
        team: teamName,
        user: "parley",
        team_id: teamId,
        user_id: botUserId,
        bot_id: botId,
      }),
    "conversations.join": (params, install) => {
      const id = str(params.channel);
      if (id === "") return refuse("channel_not_found");
      const key = `${install.botToken} ${id}`;
      const warning = joined.has(key) ? "already_in_channel" : undefined;
      joined.add(key);
      const channel = { id, name: id.toLowerCase(), is_channel: true, is_member: true };
      const warnings = warning ? { response_metadata: { warnings: [warning] } } : {};
      return reply({ ok: true, channel, warning, ...warnings });
    },
    "chat.postMessage": (params, install) => {
      const channel = str(params.channel);
      if (channel === "") return refuse("channel_not_found");
      if (!params.text && !params.blocks && !params.attachments) return refuse("no_text");
      const ts = nextTs();
      messages.set(`${channel} ${ts}`, str(params.text));
      const { blocks, thread_ts, username, metadata } = params;
      const message = {
        type: "message",
        text: str(params.text),
        user: install.botUserId,
        bot_id: install.botId,
        app_id: APP_ID,
        team: install.teamId,
        ts,
        ...defined({ blocks, thread_ts, username }),
      };
      if (thread_ts === undefined) {
        const posts = history.get(channel) ?? [];
        history.set(channel, [...posts, { ...message, ...defined({ metadata }) }]);
      }
      return reply({ ok: true, channel, ts, message });
    },
    // Newest first, `limit` a page (default 100), between `oldest` and `latest` (included with
    // `inclusive`); metadata only when asked.
    "conversations.history": (params) => {
      const oldest = Number(str(params.oldest) || "0");
      const latest = Number(str(params.latest) || "Infinity");
      const inclusive = String(params.inclusive) === "true";
      const limit = Number(params.limit ?? 100);
      const start = Number(str(params.cursor) || "0");
      const within = (ts: number) =>
        inclusive ? oldest <= ts && ts <= latest : oldest < ts && ts < latest;
      const posts = (history.get(str(params.channel)) ?? [])
        .filter((post) => within(Number(post.ts)) && messages.has(`${params.channel} ${post.ts}`))
        .reverse();
      const withMetadata = String(params.include_all_metadata) === "true";
      const page = posts.slice(start, start + limit).map(({ metadata, ...post }) =>
        withMetadata ? { ...post, ...defined({ metadata }) } : post
      );
      const more = start + limit < posts.length;
      return reply({
        ok: true,
        messages: page,
        has_more: more,
        response_metadata: { next_cursor: more ? String(start + limit) : "" },
      });
    },
    "chat.update": ({ channel, ts, text }) => {
      if (!messages.has(`${channel} ${ts}`)) return refuse("message_not_found");
      messages.set(`${channel} ${ts}`, str(text));
      return reply({ ok: true, channel, ts, text: str(text) });
    },
    "chat.delete": ({ channel, ts }) =>
      messages.delete(`${channel} ${ts}`)
        ? reply({ ok: true, channel, ts })
        : refuse("message_not_found"),
    "users.info": (params, install) => {
      const user = users.get(str(params.user));
      if (user === undefined) return refuse("user_not_found");
      const { id, displayName: display_name, realName: real_name = display_name } = user;
      const team_id = user.teamId ?? install.teamId;
      const name = display_name.toLowerCase().replace(/\s+/g, ".");
      const profile = { display_name, real_name };
      const enterprise_user = user.enterpriseId === undefined ? undefined : {
        id,
        enterprise_id: user.enterpriseId,
        enterprise_name: `Org ${user.enterpriseId}`,
        is_admin: false,
        is_owner: false,
        teams: [team_id],
      };
      return reply({
        ok: true,
        user: { id, team_id, name, real_name, profile, ...defined({ enterprise_user }) },
      });
    },
    "files.info": (params, install) => {
      const id = str(params.file);
      const file = files.get(id);
      if (file === undefined) return refuse("file_not_found");
      const { name, mimetype, bytes } = file;
      const base = `${origin}/files-pri/${install.teamId}-${id}`;
      const url_private = file.urlPrivate ?? `${base}/${encodeURIComponent(name)}`;
      const url_private_download = `${base}/download/${encodeURIComponent(name)}`;
      const filetype = name.includes(".") ? name.split(".").pop() : "binary";
      const described = { id, name, title: name, mimetype, filetype, size: bytes.length };
      return reply({ ok: true, file: { ...described, url_private, url_private_download } });
    },
  };

  const webApi = async (request: Request, url: URL, method: string): Promise<Response> => {
    const params = await readParams(request, url).catch(() => null);
    if (params === null) return refuse("invalid_json");
    const token = credentialOf(request, "Bearer") ?? (str(params.token) || null);
    delete params.token;
    calls.push({ method, token, params });
    const queued = queues.get(method)?.shift();
    if (queued !== undefined) return reply(queued.body, queued.status, queued.headers);
    if (method === "oauth.v2.access") return exchange(request, params);
    const handler = methods[method];
    if (handler === undefined) return refuse("unknown_method");
    if (token === null) return refuse("not_authed");
    const install = tokens.get(token);
    if (install === undefined) return refuse("invalid_auth");
    const answer = handler(params, install);
    const toCut = cuts.get(method) ?? 0;
    if (toCut === 0) return answer;
    cuts.set(method, toCut - 1);
    return cutShort(answer);
  };

  const download = (request: Request, fileId: string): Response => {
    if (!tokens.has(credentialOf(request, "Bearer") ?? "")) {
      return new Response("Forbidden", { status: 403 });
    }
    const file = files.get(decodeURIComponent(fileId));
    if (file === undefined) return new Response("Not found", { status: 404 });
    return new Response(file.bytes.slice(), { headers: { "content-type": file.mimetype } });
  };

  const handle = (request: Request): Promise<Response> | Response => {
    const url = new URL(request.url);
    const method = /^\/api\/([A-Za-z0-9_.]+)$/.exec(url.pathname)?.[1];
    if (method !== undefined) return webApi(request, url, method);
    const file = request.method === "GET" ? FILE_PATH.exec(url.pathname) : null;
    if (file !== null) return download(request, file[1]);
    if (request.method === "GET" && url.pathname === "/oauth/v2/authorize") {
      return new Response(CONSENT_PAGE, {
        headers: { "content-type": "text/html; charset=utf-8" },
      });
    }
    return new Response("Not found", { status: 404 });
  };

  /** POSTs `body` to `url` as Slack does, signed unless `signing` says otherwise. */
  const sendSigned = (
    url: string,
    body: string,
    contentType: string,
    signing: FakeSlackSigning,
    extra: Record<string, string> = {},
  ): Promise<Response> => {
    const raw = new TextEncoder().encode(body);
    const timestamp = String(signing.timestamp ?? Math.floor(Date.now() / 1000));
    const signature = signing.signature === undefined
      ? slackSignature(raw, timestamp, signing.signingSecret ?? options.signingSecret)
      : signing.signature;
    const headers: Record<string, string> = {
      "content-type": contentType,
      "user-agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
      "x-slack-request-timestamp": timestamp,
      ...(signature === null ? {} : { "x-slack-signature": signature }),
      ...extra,
    };
    return fetch(url, { method: "POST", headers, body: raw });
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, handle);
  const origin = `http://127.0.0.1:${server.addr.port}`;
  return Promise.resolve({
    apiUrl: `${origin}/api/`,
    authorizeUrl: `${origin}/oauth/v2/authorize`,
    calls,
    queue: (method, ...responses) =>
      void queues.set(method, [...(queues.get(method) ?? []), ...responses]),
    cutAnswers: (method, count = 1) => void cuts.set(method, (cuts.get(method) ?? 0) + count),
    issueCode(install = {}) {
      const code = `${codes.size + 1}.${Date.now()}.${hex(32)}`;
      codes.set(code, {
        teamId: "T00000001",
        teamName: "Fake Workspace",
        channelId: "C00000001",
        botToken: `xoxb-${codes.size + 1}-${hex(24)}`,
        botUserId: "U0BOT0001",
        botId: "B0BOT0001",
        enterprise: null,
        ...defined({ ...install }),
        used: false,
      });
      return code;
    },
    addUser: (user) => void users.set(user.id, { ...user }),
    addFile: ({ id, bytes, ...file }) => void files.set(id, { ...file, bytes: bytes.slice() }),
    postEvent(url, body, signing = {}) {
      const retry: Record<string, string> = signing.retryNum === undefined
        ? {}
        : { "x-slack-retry-num": String(signing.retryNum), "x-slack-retry-reason": "http_timeout" };
      return sendSigned(url, JSON.stringify(body), "application/json", signing, retry);
    },
    postAction(url, payload, signing = {}) {
      const body = new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
      return sendSigned(url, body, "application/x-www-form-urlencoded", signing);
    },
    [Symbol.asyncDispose]: () => server.shutdown(),
  });
}
