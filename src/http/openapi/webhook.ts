/**
 * `GET /webhook` and `PUT /webhook` of the Open API (SPEC §4.1, CONTRACT §5.1): the application's
 * one webhook configuration. A PUT is a full replacement, goes through the application's actor
 * like every write, and answers the signing secret, which is created by the first PUT, stored
 * sealed, and never rotated by a later one. GET never shows the secret.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { Sql } from "../../db/client.ts";
import { findWebhook, type StoredWebhook } from "../../db/webhooks.ts";
import { appActorKey, type AppCommand, type CommandResult } from "../../actors/protocol.ts";
import type { SecretBox } from "../../crypto/secret_box.ts";
import { randomHex } from "../../crypto/tokens.ts";
import { AppError } from "../../domain/app_error.ts";
import { NO_WEBHOOK, WEBHOOK_EVENTS, webhookConfigOf } from "../../domain/webhook_config.ts";
import { readJson } from "../body.ts";
import { ok } from "../envelope.ts";
import type { ApiKeyAuthVariables } from "../middleware/api_key_auth.ts";
import type { RouteDoc } from "./schemas.ts";

/** What the webhook routes need. */
export interface WebhookRoutesDeps {
  sql: Sql;
  ask(key: string, command: AppCommand): Promise<CommandResult>;
  secretBox: SecretBox;
  /** Resolves when `url` may be called; throws `AppError` 400 otherwise (the SSRF guard). */
  checkWebhookUrl(url: string): Promise<void>;
}

const WEBHOOK_CONFIG = z.strictObject({
  url: z.string().meta({ description: "An https URL resolving to public addresses; blank: none" }),
  events: z.array(z.enum(WEBHOOK_EVENTS)),
  enabled: z.boolean(),
}).meta({ id: "WebhookConfig" });

const PUT_WEBHOOK_BODY = z.object({
  url: z.string().optional().meta({
    description: "https, resolving to public addresses only; omitted or blank clears the webhook",
  }),
  events: z.array(z.string()).optional().meta({
    description: `Names from ${WEBHOOK_EVENTS.join(", ")}; unknown names are dropped`,
  }),
  enabled: z.boolean().optional().meta({ description: "Default true; false when url is blank" }),
});

/** How these routes appear in the OpenAPI document. */
export const WEBHOOK_ROUTE_DOCS: RouteDoc[] = [
  {
    method: "get",
    path: "/webhook",
    summary: "The application's webhook configuration (never its secret)",
    data: WEBHOOK_CONFIG,
    errors: [],
  },
  {
    method: "put",
    path: "/webhook",
    summary: "Replace the webhook configuration; omitted fields take their zero values",
    body: { schema: PUT_WEBHOOK_BODY, mediaTypes: ["application/json"] },
    data: z.strictObject({
      ...WEBHOOK_CONFIG.shape,
      secret: z.string().regex(/^whsec_[0-9a-f]{64}$/).meta({
        description: "The signing secret: created by the first PUT, the same ever after",
      }),
    }),
    errors: [400, 413, 415],
  },
];

/** Routes under `/openapi/v1/webhook`. */
export function webhookRoutes(deps: WebhookRoutesDeps): Hono<{ Variables: ApiKeyAuthVariables }> {
  const routes = new Hono<{ Variables: ApiKeyAuthVariables }>();

  routes.get("/", async (c) => {
    return ok(c, await findWebhook(deps.sql, c.get("caller").appId) ?? NO_WEBHOOK);
  });

  routes.put("/", async (c) => {
    const { appId } = c.get("caller");
    const config = webhookConfigOf(await readJson(c));
    if (config.url !== "") await deps.checkWebhookUrl(config.url);
    const result = await deps.ask(appActorKey(appId), {
      kind: "webhook.configure",
      appId,
      ...config,
      newSecretSealed: deps.secretBox.seal(`whsec_${randomHex(32)}`),
    });
    if (!result.ok) throw new AppError(result.status, result.message);
    const stored = result.value as StoredWebhook;
    return ok(c, {
      url: stored.url,
      events: stored.events,
      enabled: stored.enabled,
      secret: deps.secretBox.open(stored.secretSealed),
    });
  });

  return routes;
}
