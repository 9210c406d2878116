/**
 * The Slack channel's endpoints (CONTRACT §6.2), under `/api/v1/slack`: the install (`/install`
 * from a single-use ticket, `/callback` from Slack's consent screen), and Slack's requests
 * (`/events`, `/actions`) — verified over the raw bytes with the signing secret, stored, answered
 * at once and applied after the answer.
 */
import { fetchMedia } from "../channels/media_fetch.ts";
import { Hono } from "hono";
import { getCookie, setCookie } from "hono/cookie";
import { readRequestBody } from "./middleware/body_size_limit.ts";
import type { Sql } from "../db/client.ts";
import { insertSlackDeliveries } from "../db/slack_inbound.ts";
import { createBatchedWriter, STORE_LINGER_MS } from "../db/batched_writer.ts";
import { AppError } from "../domain/app_error.ts";
import { describeError, log } from "../log.ts";
import { couldBeSlackRequest, isValidSlackRequest } from "../channels/slack/signature.ts";
import {
  beginInstall,
  completeInstall,
  SLACK_STATE_COOKIE,
  type SlackInstallerDeps,
} from "../channels/slack/installer.ts";
import type { SlackInboundProcessor } from "../channels/slack/inbound_processor.ts";
import { methodNotAllowed } from "./method_not_allowed.ts";
import { mediaResponse } from "./media_response.ts";
import type { MediaLinks } from "../channels/media_links.ts";
import { slackErrorOf, type SlackWebClient } from "../channels/slack/web_client.ts";
import { findInstallationByApp } from "../db/slack_installations.ts";
import { findMediaApps, isMediaWithdrawn } from "../db/channel_media.ts";
import { isSlackFileHost } from "../domain/media_hosts.ts";
import { drawStorerId } from "../channels/earlier_deliveries.ts";
import {
  parseSlackRequest,
  type SlackDocument,
  slackTeamOf,
  storableSlackBody,
} from "../domain/slack_request.ts";
import { slackOrderScopes } from "../domain/order_scopes.ts";

/** What the Slack routes need. */
export interface SlackRoutesDeps extends SlackInstallerDeps {
  sql: Sql;
  slackInbound: Pick<SlackInboundProcessor, "process">;
  /** Verifies links to the media proxy. */
  slackMediaLinks: MediaLinks;
  /** A Web API client for a bot token (sealed). */
  slackClients(botTokenSealed: string): SlackWebClient;
  /**
   * The media proxy's client for a bot token: it hands a 429 back at once (`rejectRateLimited`),
   * as a visitor's download must not wait as long as Slack asks.
   */
  slackMediaClients(botTokenSealed: string): SlackWebClient;
}

/** Largest request accepted from Slack (its events are small; files never come inline). */
const MAX_SLACK_BODY_BYTES = 1024 * 1024;

/** Failures that say Slack itself failed (no answer, or its own errors), not that the file is gone. */
const SLACK_OUTAGE_CODES = new Set([
  "http_error",
  "request_error",
  "internal_error",
  "fatal_error",
  "service_unavailable",
  "request_timeout",
]);

/**
 * The answer to a `files.info` that failed: 503 with Slack's `Retry-After` when rate-limited, 502
 * when Slack did not answer, else 404 (the file is gone, or the bot may not see it).
 */
function fileLookupFailure(error: unknown): AppError {
  const { code, retryAfterMs } = slackErrorOf(error);
  if (code === "ratelimited") {
    const seconds = retryAfterMs === null ? null : Math.max(1, Math.ceil(retryAfterMs / 1000));
    return new AppError(503, "Slack is limiting file lookups: try again later", {
      headers: seconds === null ? {} : { "Retry-After": String(seconds) },
    });
  }
  if (SLACK_OUTAGE_CODES.has(code)) return new AppError(502, "Slack did not answer");
  return new AppError(404, "File not found");
}

/** Routes under `/api/v1/slack`. */
export function slackRoutes(deps: SlackRoutesDeps): Hono {
  // Requests arriving together are stored in one statement, as this instance's.
  const storedBy = drawStorerId();
  const storeDelivery = createBatchedWriter(
    (
      rows: {
        kind: "event" | "action";
        teamId: string;
        body: Uint8Array;
        scopes: string[] | null;
      }[],
    ) => insertSlackDeliveries(deps.sql, storedBy, rows),
    { lingerMs: STORE_LINGER_MS },
  );
  const routes = new Hono();
  const secure = deps.publicBaseUrl.startsWith("https:");

  routes.get("/install", async (c) => {
    const { state, location } = await beginInstall(deps, c.req.query("ticket"));
    setCookie(c, SLACK_STATE_COOKIE, state, {
      httpOnly: true,
      sameSite: "Lax",
      secure,
      maxAge: 600,
      path: "/api/v1/slack",
    });
    return c.redirect(location, 302);
  });

  routes.get("/callback", async (c) => {
    const cookieState = getCookie(c, SLACK_STATE_COOKIE);
    await completeInstall(deps, c.req.query(), cookieState);
    setCookie(c, SLACK_STATE_COOKIE, "", { path: "/api/v1/slack", maxAge: 0 });
    return c.redirect(`${deps.publicBaseUrl}/dashboard`, 302);
  });

  /** The raw body of a request Slack signed; 401 for any other (or with no secret set). */
  async function verifiedBody(request: Request): Promise<Uint8Array> {
    const headers = {
      timestamp: request.headers.get("x-slack-request-timestamp"),
      signature: request.headers.get("x-slack-signature"),
    };
    // Headers that cannot pass cost no upload, whatever its size; a body gets 10 s to arrive.
    if (!couldBeSlackRequest(headers, deps.slack.signingSecret) || !request.body) {
      throw new AppError(401, "Invalid Slack signature");
    }
    const raw = await readRequestBody(request, MAX_SLACK_BODY_BYTES);
    if (!isValidSlackRequest(raw, headers, deps.slack.signingSecret)) {
      throw new AppError(401, "Invalid Slack signature");
    }
    return raw;
  }

  /**
   * Stores a verified request and applies it after the answer (`document`: `raw` parsed, see
   * `parseSlackRequest`).
   */
  async function receive(kind: "event" | "action", raw: Uint8Array, document: SlackDocument) {
    const teamId = slackTeamOf(document);
    const scopes = slackOrderScopes(kind, document);
    const body = storableSlackBody(kind, raw, document);
    const { id, earlier } = await storeDelivery({ kind, teamId, body, scopes });
    setTimeout(() => {
      deps.slackInbound.process(kind, id, body, document, earlier).catch((error) =>
        log("error", "slack request failed", { kind, ...describeError(error) })
      );
    }, 0);
  }

  routes.post("/events", async (c) => {
    const raw = await verifiedBody(c.req.raw);
    let body: { type?: unknown; challenge?: unknown } | null = null;
    try {
      body = JSON.parse(new TextDecoder().decode(raw));
    } catch {
      throw new AppError(400, "Invalid JSON body");
    }
    if (body?.type === "url_verification") return c.json({ challenge: body.challenge });
    await receive("event", raw, body);
    return c.body(null, 200);
  });

  routes.post("/actions", async (c) => {
    const raw = await verifiedBody(c.req.raw);
    await receive("action", raw, parseSlackRequest("action", new TextDecoder().decode(raw)));
    return c.body(null, 200);
  });

  routes.get("/media/:fileId", async (c) => {
    const fileId = c.req.param("fileId");
    const appId = await deps.slackMediaLinks.verify(
      fileId,
      c.req.query(),
      () => findMediaApps(deps.sql, "slack", fileId),
    );
    if (appId === null) throw new AppError(403, "Invalid or expired media link");
    // A file whose reply was deleted, or made a note, is the visitor's no longer.
    if (await isMediaWithdrawn(deps.sql, "slack", appId, fileId)) {
      throw new AppError(410, "File withdrawn");
    }
    const installation = await findInstallationByApp(deps.sql, appId);
    if (!installation) throw new AppError(404, "File not found");
    let file;
    try {
      ({ file } = await deps.slackMediaClients(installation.botTokenSealed).files.info({
        file: fileId,
      }));
    } catch (error) {
      throw fileLookupFailure(error);
    }
    const source = file?.url_private;
    if (!source) throw new AppError(404, "File not found");
    // The bot token goes only to Slack's own file hosts (CONTRACT §6.2: else 403).
    if (!isSlackFileHost(source, deps.slack.apiUrl)) {
      throw new AppError(403, "File is not on a Slack file host");
    }
    const download = await fetchMedia(source, {
      headers: { authorization: `Bearer ${deps.secretBox.open(installation.botTokenSealed)}` },
    }).catch(() => null);
    if (!download?.ok) {
      await download?.body?.cancel();
      throw new AppError(502, "Slack did not answer");
    }
    return mediaResponse(
      download.body,
      download.headers.get("content-type") ?? file?.mimetype ?? "application/octet-stream",
      download.headers.get("content-length"),
      download.headers.get("content-encoding"),
    );
  });

  methodNotAllowed(routes, ["/install", "/callback", "/events", "/actions", "/media/:fileId"]);
  return routes;
}
