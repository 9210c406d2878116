/**
 * The delivery log and replay of the Open API (CONTRACT §2.6, beyond SPEC.md):
 * `GET /webhook/deliveries` lists the application's deliveries newest first with their attempts,
 * and `POST /webhook/deliveries/{id}/retry` schedules an immediate new attempt. Another
 * application's delivery is answered like one that does not exist.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { Sql } from "../../db/client.ts";
import { listDeliveries, retryDelivery } from "../../db/deliveries.ts";
import { AppError } from "../../domain/app_error.ts";
import { WEBHOOK_EVENTS } from "../../domain/webhook_config.ts";
import { eventIdOf } from "../../webhooks/deliver.ts";
import { ok } from "../envelope.ts";
import { filterParam, idParam, limitParam } from "../query_params.ts";
import type { ApiKeyAuthVariables } from "../middleware/api_key_auth.ts";
import { type RouteDoc, TIMESTAMP } from "./schemas.ts";

/** What the delivery routes need. */
export interface DeliveryRoutesDeps {
  sql: Sql;
  /** Tells the deliverer that something is due now. */
  wakeDeliveries(): void;
}

const DELIVERY_STATUSES = ["pending", "succeeded", "failed"] as const;

const LIST_QUERY = z.object({
  status: filterParam(DELIVERY_STATUSES, "Only deliveries in this state; omit for all"),
  limit: limitParam(20, 1, 100),
});

const DELIVERY_PARAMS = z.object({ id: idParam("The delivery id") });

const DELIVERY = z.strictObject({
  id: z.int().positive(),
  event_id: z.string().regex(/^evt_[0-9a-f]+$/).meta({
    description: "The id in the body and the X-Webhook-Id / webhook-id headers",
  }),
  type: z.enum(WEBHOOK_EVENTS),
  status: z.enum(DELIVERY_STATUSES),
  created_at: TIMESTAMP,
  next_attempt_at: TIMESTAMP.nullable(),
  attempts: z.array(z.strictObject({
    attempted_at: TIMESTAMP,
    status_code: z.int().nullable(),
    latency_ms: z.int().min(0),
    error: z.string().nullable(),
    response_excerpt: z.string().nullable().meta({ description: "At most 1 KiB" }),
  })),
}).meta({ id: "Delivery" });

/** How these routes appear in the OpenAPI document. */
export const DELIVERY_ROUTE_DOCS: RouteDoc[] = [
  {
    method: "get",
    path: "/webhook/deliveries",
    extension: true,
    summary: "The webhook's deliveries, newest first, each with its attempts (kept 14 days)",
    query: LIST_QUERY,
    data: z.array(DELIVERY),
    errors: [400],
  },
  {
    method: "post",
    path: "/webhook/deliveries/{id}/retry",
    extension: true,
    summary: "Schedule an immediate new attempt of a delivery",
    params: DELIVERY_PARAMS,
    data: z.strictObject({ id: z.int().positive(), status: z.literal("pending") }),
    errors: [404],
  },
];

/** Routes under `/openapi/v1/webhook/deliveries`. */
export function deliveryRoutes(deps: DeliveryRoutesDeps): Hono<{ Variables: ApiKeyAuthVariables }> {
  const routes = new Hono<{ Variables: ApiKeyAuthVariables }>();

  routes.get("/", async (c) => {
    const query = LIST_QUERY.safeParse(c.req.query());
    if (!query.success) {
      throw new AppError(400, `status must be one of: ${DELIVERY_STATUSES.join(", ")}`);
    }
    const { appId } = c.get("caller");
    const rows = await listDeliveries(deps.sql, appId, query.data);
    return ok(
      c,
      rows.map((row) => ({
        id: row.id,
        event_id: eventIdOf({ appId, id: row.id }),
        type: row.type,
        status: row.status,
        created_at: row.created_at,
        next_attempt_at: row.next_attempt_at,
        attempts: row.attempts,
      })),
    );
  });

  routes.post("/:id/retry", async (c) => {
    const params = DELIVERY_PARAMS.safeParse({ id: c.req.param("id") });
    const retried = params.success &&
      await retryDelivery(deps.sql, c.get("caller").appId, params.data.id);
    if (!retried) throw new AppError(404, "Delivery not found");
    deps.wakeDeliveries();
    return ok(c, { id: params.data.id, status: "pending" });
  });

  return routes;
}
