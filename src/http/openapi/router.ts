/**
 * The Open API surface (`/openapi/v1`, CONTRACT §2). Checks run in the contract's order: the
 * rate limit counts every request (401s and 404s included), then the API key is checked, then
 * the route validates, and the data layer checks ownership. The OpenAPI document is the one
 * route that needs no key.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import type { Sql } from "../../db/client.ts";
import type { AppCommand, CommandResult } from "../../actors/protocol.ts";
import { createBucketNames } from "../../rate_limit/bucket_names.ts";
import { AppError } from "../../domain/app_error.ts";
import type { HitCounter } from "../../rate_limit/hit_counter.ts";
import { clientIp } from "../client_ip.ts";
import { methodNotAllowed } from "../method_not_allowed.ts";
import {
  type ApiCaller,
  apiKeyAuth,
  type ApiKeyAuthVariables,
  bearerCredential,
} from "../middleware/api_key_auth.ts";
import { bodySizeLimit } from "../middleware/body_size_limit.ts";
import { rateLimit } from "../middleware/rate_limit.ts";
import { CONVERSATION_ROUTE_DOCS, conversationRoutes } from "./conversations.ts";
import { buildOpenApiDocument } from "./document.ts";
import { MESSAGE_ROUTE_DOCS, messageRoutes } from "./messages.ts";
import { WEBHOOK_ROUTE_DOCS, webhookRoutes, type WebhookRoutesDeps } from "./webhook.ts";
import {
  DELIVERY_ROUTE_DOCS,
  deliveryRoutes,
  type DeliveryRoutesDeps,
} from "./webhook_deliveries.ts";
import { FLOW_ROUTE_DOCS, flowRoutes } from "./flow.ts";
import type { RouteDoc } from "./schemas.ts";
import type { ConversationListCache } from "../../cache/conversation_lists.ts";
import { z } from "zod";
import { refuseWhileShuttingDown, type ShuttingDown } from "../middleware/shutting_down.ts";
import { requestDeadline } from "../middleware/request_deadline.ts";

/** What the Open API needs. */
export interface OpenApiDeps extends WebhookRoutesDeps, DeliveryRoutesDeps {
  sql: Sql;
  /** Marks the requests that arrived once the stop began: refused after the rate limit. */
  shuttingDown?: ShuttingDown;
  /** How long a request may go unanswered (see `request_deadline.ts`). @default REQUEST_DEADLINE_MS */
  requestDeadlineMs?: number;
  ask(key: string, command: AppCommand): Promise<CommandResult>;
  /** The active key with this plaintext, or null. */
  findApiKey(key: string): Promise<ApiCaller | null>;
  /** Where Open API requests are counted (exactly, across instances). */
  apiHitCounter: HitCounter;
  /** Requests per minute and bucket. */
  rateLimitPerMinute: number;
  trustProxy: boolean;
  publicBaseUrl: string;
  /** First pages of the conversation listings, kept in memory. */
  listings: ConversationListCache;
}

const DOCUMENT_ROUTE: RouteDoc = {
  method: "get",
  path: "/openapi.json",
  extension: true,
  summary: "This document (no API key needed)",
  data: z.looseObject({ openapi: z.literal("3.1.0") }),
  errors: [],
  public: true,
  bare: true,
};

/** Routes under `/openapi/v1`. */
export function openApiRoutes(deps: OpenApiDeps): Hono<{ Variables: ApiKeyAuthVariables }> {
  const document = JSON.stringify(buildOpenApiDocument(
    [
      ...CONVERSATION_ROUTE_DOCS,
      ...MESSAGE_ROUTE_DOCS,
      ...WEBHOOK_ROUTE_DOCS,
      ...DELIVERY_ROUTE_DOCS,
      ...FLOW_ROUTE_DOCS,
      DOCUMENT_ROUTE,
    ],
    { publicBaseUrl: deps.publicBaseUrl, rateLimitPerMinute: deps.rateLimitPerMinute },
  ));
  const routes = new Hono<{ Variables: ApiKeyAuthVariables }>();

  const bucketOfCredential = createBucketNames({ prefix: "api:" });
  routes.use(rateLimit({
    counter: deps.apiHitCounter,
    limit: deps.rateLimitPerMinute,
    bucketOf: (c) => bucketOf(c, deps.trustProxy, bucketOfCredential),
  }));
  routes.use(refuseWhileShuttingDown(deps.shuttingDown));
  // After the rate limit, whose headers its answer carries too.
  routes.use(requestDeadline(deps.requestDeadlineMs));
  routes.get(
    "/openapi.json",
    (c) => c.body(document, 200, { "content-type": "application/json; charset=utf-8" }),
  );
  routes.use(apiKeyAuth({ findKey: deps.findApiKey }));
  routes.use(bodySizeLimit());
  routes.route("/conversations", conversationRoutes(deps));
  routes.route("/messages", messageRoutes(deps));
  routes.route("/webhook/deliveries", deliveryRoutes(deps));
  routes.route("/webhook", webhookRoutes(deps));
  routes.route("/flow", flowRoutes(deps));
  methodNotAllowed(routes, [
    "/openapi.json",
    "/conversations",
    "/conversations/:id",
    "/conversations/:id/messages",
    "/messages",
    "/webhook",
    "/webhook/deliveries",
    "/webhook/deliveries/:id/retry",
    "/flow",
  ]);
  routes.all("*", () => {
    throw new AppError(404, "Not found");
  });
  return routes;
}

/**
 * The rate-limit bucket (CONTRACT §2.3): the exact credential of a Bearer `Authorization` header,
 * else the client IP. The scheme's case is not part of it (`bearer` and `BEARER` name the same
 * key, so they share its count rather than multiply it). Hashed, so that no key is written to the
 * counters table.
 */
function bucketOf(
  c: Context,
  trustProxy: boolean,
  bucketOfCredential: (authorization: string) => string,
): string {
  const credential = bearerCredential(c.req.header("authorization"));
  if (credential !== null) return bucketOfCredential(`Bearer ${credential}`);
  return `api-ip:${clientIp(c, trustProxy)}`;
}
