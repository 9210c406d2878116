/**
 * A local stand-in for the WhatsApp Cloud (Graph) API, for integration tests that send messages
 * and fetch media without reaching Meta: a real HTTP server on loopback that answers in Meta's
 * formats — the send response with a fresh `wamid`, the media lookup with a short-lived download
 * URL on this server, and Meta's error body with 401/code 190 for a bad token and 400/code 100 for
 * a bad request. Tests queue the answers they need (a 429 with `Retry-After`, a 500, a policy
 * error) and read back every call in order.
 */
import { createHash } from "node:crypto";

/** The Graph API version in {@linkcode FakeGraphApi.url}, as `WHATSAPP_GRAPH_URL` carries one. */
const GRAPH_VERSION = "v21.0";
/** The path of download URLs, as on Meta's `lookaside.fbsbx.com`. */
const DOWNLOAD_PATH = "/whatsapp_business/attachments/";
/** How long Meta says a media URL stays valid. */
const MEDIA_URL_SECONDS = 300;

/** One request the fake received. */
export interface GraphCall {
  method: string;
  /** Path and query, e.g. `/v21.0/106540352242922/messages`. */
  path: string;
  authorization: string | null;
  /** The JSON body parsed, the raw text when it is not JSON, or null when empty. */
  body: unknown;
}

/** An answer to queue: status, body (sent as JSON unless it is a string) and extra headers. */
export interface FakeGraphResponse {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  /** Answered once this settles (a send whose answer is slow). */
  after?: Promise<unknown>;
}

/** A running fake Graph API; disposing of it stops the server. */
export interface FakeGraphApi extends AsyncDisposable {
  /** The versioned base URL, e.g. `http://127.0.0.1:PORT/v21.0` (what `WHATSAPP_GRAPH_URL` is set to). */
  url: string;
  /** Every request, in the order received. */
  calls: GraphCall[];
  /**
   * Queues answers for the next valid `POST /{phone_number_id}/messages` calls, first in first
   * out; a call rejected for its token or body is answered 401/400 and does not take one. With
   * the queue empty a call succeeds:
   * `{"messaging_product":"whatsapp","contacts":[{"input":to,"wa_id":to}],"messages":[{"id":"wamid.…"}]}`
   * (`{"input":recipient,"user_id":recipient}` for a send to a BSUID) with a `wamid` never given
   * before.
   */
  queueMessageResponses(...responses: FakeGraphResponse[]): void;
  /**
   * Registers media: `GET {url}/{id}` (Bearer token required) answers Meta's description
   * `{"messaging_product":"whatsapp","url","mime_type","sha256","file_size","id"}` whose `url`, on
   * this server, streams `bytes` with `mimeType` as Content-Type (Bearer token required) until
   * {@linkcode FakeGraphApi.expireMediaUrls}; each lookup gives a new URL — or `url`, as given.
   */
  addMedia(id: string, bytes: Uint8Array, mimeType: string, url?: string): void;
  /** Makes every download URL given so far answer 404, as Meta's do a few minutes after lookup. */
  expireMediaUrls(): void;
  /**
   * Makes later downloads send their head and the first half of the file, then nothing more
   * until this fake stops: an upstream that stalls mid-body.
   */
  stallDownloads(): void;
  /** Meta's error body: `{"error":{"message","type","code","error_subcode"?,"fbtrace_id"}}`. */
  errorBody(code: number, message: string, subcode?: number): unknown;
}

/** How the fake checks callers. */
export interface FakeGraphApiOptions {
  /**
   * The only access token accepted as `Authorization: Bearer <token>`; any other, or none,
   * answers 401 with error code 190. Unset, message sends need no token and media calls any.
   * @default undefined
   */
  accessToken?: string;
}

/** Meta's error body for `code`. */
function errorBody(code: number, message: string, subcode?: number): unknown {
  const fbtrace_id = crypto.randomUUID().replaceAll("-", "").slice(0, 22);
  const error_subcode = subcode === undefined ? {} : { error_subcode: subcode };
  return { error: { message, type: "OAuthException", code, ...error_subcode, fbtrace_id } };
}

/** A JSON response (a string body is sent as it is). */
function reply(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return new Response(text, {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

/** The 401 Meta answers for a missing or invalid access token. */
function unauthorized(): Response {
  const message = "Invalid OAuth access token - Cannot parse access token";
  const challenge = `OAuth "Facebook Platform" "invalid_token" "${message}"`;
  return reply(401, errorBody(190, message), { "www-authenticate": challenge });
}

/** A request body as recorded: parsed JSON, else the text, else null. */
function recordedBody(text: string): unknown {
  if (text === "") return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * Why a messages POST body is one Meta rejects with code 100, or null when it is not. The user is
 * named by `to` (a phone number) or `recipient` (a business-scoped user id).
 */
function invalidSend(body: unknown): string | null {
  const fields = typeof body === "object" && body !== null ? body as Record<string, unknown> : {};
  // Without either, Meta names `to`, the parameter every send had before usernames.
  const addressee = fields.to === undefined && typeof fields.recipient === "string"
    ? "recipient"
    : "to";
  for (const name of ["messaging_product", addressee, "type"]) {
    const value = fields[name];
    if (typeof value !== "string" || value === "") {
      return `(#100) The parameter ${name} is required.`;
    }
  }
  if (fields.messaging_product !== "whatsapp") {
    const got = JSON.stringify(fields.messaging_product);
    return `(#100) Param messaging_product must be one of {WHATSAPP} - got ${got}.`;
  }
  return null;
}

/**
 * Starts a fake WhatsApp Cloud API on `127.0.0.1` and a free port. Every request is recorded in
 * `calls`. Routes: `POST /{version}/{phone_number_id}/messages`, `GET /{version}/{media_id}`
 * and the download URLs it gives; anything else answers 400 with code 2500, as Graph does for
 * an unknown path.
 */
export function startFakeGraphApi(options: FakeGraphApiOptions = {}): Promise<FakeGraphApi> {
  const { accessToken } = options;
  const calls: GraphCall[] = [];
  const queued: FakeGraphResponse[] = [];
  const media = new Map<
    string,
    { bytes: Uint8Array; mimeType: string; sha256: string; url?: string }
  >();
  /** Live download links: hash → media id. */
  const links = new Map<string, string>();
  /** Bodies of stalled downloads, ended when the fake stops. */
  const stalled = new Set<ReadableStreamDefaultController<Uint8Array>>();
  let stall = false;
  let sent = 0;

  /** Whether `authorization` passes: the token when one is set, else any Bearer token if `required`. */
  const authorized = (authorization: string | null, required: boolean): boolean => {
    const token = /^Bearer (\S+)$/.exec(authorization ?? "")?.[1];
    return accessToken === undefined ? !required || token !== undefined : token === accessToken;
  };

  const send = async (body: unknown): Promise<Response> => {
    const invalid = invalidSend(body);
    if (invalid !== null) return reply(400, errorBody(100, invalid));
    const next = queued.shift();
    await next?.after;
    if (next !== undefined) return reply(next.status, next.body, next.headers);
    // As Meta answers: `to` wins over `recipient`; a BSUID comes back as `user_id`.
    const { to, recipient } = body as { to?: string; recipient: string };
    const wamid = `wamid.${btoa(`${++sent}:${crypto.randomUUID()}`)}`;
    const contacts = [to ? { input: to, wa_id: to } : { input: recipient, user_id: recipient }];
    return reply(200, { messaging_product: "whatsapp", contacts, messages: [{ id: wamid }] });
  };

  const describe = (id: string): Response => {
    const found = media.get(id);
    if (found === undefined) {
      const message = `Unsupported get request. Object with ID '${id}' does not exist, cannot be ` +
        "loaded due to missing permissions, or does not support this operation.";
      return reply(400, errorBody(100, message, 33));
    }
    const hash = crypto.randomUUID().replaceAll("-", "");
    links.set(hash, id);
    const expires = Math.floor(Date.now() / 1000) + MEDIA_URL_SECONDS;
    const download = new URL(DOWNLOAD_PATH, origin);
    download.search = new URLSearchParams({ mid: id, ext: String(expires), hash }).toString();
    return reply(200, {
      messaging_product: "whatsapp",
      url: found.url ?? download.href,
      mime_type: found.mimeType,
      sha256: found.sha256,
      file_size: found.bytes.length,
      id,
    });
  };

  const download = (query: URLSearchParams): Response => {
    const id = links.get(query.get("hash") ?? "");
    const found = id === query.get("mid") ? media.get(id ?? "") : undefined;
    if (found === undefined) return reply(404, errorBody(100, "Media URL not found or expired"));
    const headers = {
      "content-type": found.mimeType,
      "content-length": String(found.bytes.length),
    };
    if (!stall) return new Response(found.bytes.slice(), { headers });
    let held: ReadableStreamDefaultController<Uint8Array>;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(found.bytes.slice(0, found.bytes.length >> 1));
        stalled.add(held = controller);
      },
      cancel: () => void stalled.delete(held),
    });
    return new Response(body, { headers });
  };

  const handle = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const authorization = request.headers.get("authorization");
    const body = recordedBody(await request.text());
    calls.push({ method: request.method, path: url.pathname + url.search, authorization, body });

    if (request.method === "GET" && url.pathname === DOWNLOAD_PATH) {
      return authorized(authorization, true) ? download(url.searchParams) : unauthorized();
    }
    const parts = /^\/v\d+\.\d+\/([^/]+)(?:\/([^/]+))?\/?$/.exec(url.pathname);
    if (request.method === "POST" && parts?.[2] === "messages") {
      return authorized(authorization, false) ? send(body) : unauthorized();
    }
    if (request.method === "GET" && parts !== null && parts[2] === undefined) {
      return authorized(authorization, true)
        ? describe(decodeURIComponent(parts[1]))
        : unauthorized();
    }
    return reply(400, errorBody(2500, `Unknown path components: ${url.pathname}`));
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, handle);
  const origin = `http://127.0.0.1:${server.addr.port}`;
  return Promise.resolve({
    url: `${origin}/${GRAPH_VERSION}`,
    calls,
    queueMessageResponses: (...responses) => void queued.push(...responses),
    addMedia(id, bytes, mimeType, url) {
      const sha256 = createHash("sha256").update(bytes).digest("hex");
      media.set(id, { bytes: bytes.slice(), mimeType, sha256, url });
    },
    expireMediaUrls: () => links.clear(),
    stallDownloads: () => void (stall = true),
    errorBody,
    [Symbol.asyncDispose]() {
      for (const controller of stalled) controller.close();
      stalled.clear();
      return server.shutdown();
    },
  });
}
