/**
 * `GET`, `PUT` and `DELETE /flow` of the Open API (CONTRACT §2.6, §4.1), an extension beyond
 * SPEC.md: the application's one Flow. A PUT validates the whole Flow and replaces the stored
 * one through the application's actor, so that a Flow changes between two batches of the
 * application's writes, never inside one.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { Sql } from "../../db/client.ts";
import { findFlow } from "../../db/flows.ts";
import { appActorKey, type AppCommand, type CommandResult } from "../../actors/protocol.ts";
import { AppError } from "../../domain/app_error.ts";
import { type Flow, FLOW_DOCUMENT, parseFlow } from "../../domain/flow.ts";
import { readJson } from "../body.ts";
import { ok } from "../envelope.ts";
import type { ApiKeyAuthVariables } from "../middleware/api_key_auth.ts";
import type { RouteDoc } from "./schemas.ts";

/** What the Flow routes need. */
export interface FlowRoutesDeps {
  sql: Sql;
  ask(key: string, command: AppCommand): Promise<CommandResult>;
}

/** How these routes appear in the OpenAPI document. */
export const FLOW_ROUTE_DOCS: RouteDoc[] = [
  {
    method: "get",
    path: "/flow",
    summary: "The application's Flow, or null when it has none",
    data: FLOW_DOCUMENT.nullable(),
    errors: [],
    extension: true,
  },
  {
    method: "put",
    path: "/flow",
    summary: "Replace the application's Flow (validated whole: 400 Invalid flow: <detail>)",
    body: { schema: FLOW_DOCUMENT, mediaTypes: ["application/json"] },
    data: FLOW_DOCUMENT,
    errors: [400, 413, 415],
    extension: true,
  },
  {
    method: "delete",
    path: "/flow",
    summary: "Remove the application's Flow; conversations it waits in stop there",
    data: z.null(),
    errors: [],
    extension: true,
  },
];

/** Routes under `/openapi/v1/flow`. */
export function flowRoutes(deps: FlowRoutesDeps): Hono<{ Variables: ApiKeyAuthVariables }> {
  const routes = new Hono<{ Variables: ApiKeyAuthVariables }>();

  async function store(appId: number, flow: Flow | null): Promise<unknown> {
    const result = await deps.ask(appActorKey(appId), { kind: "flow.set", appId, flow });
    if (!result.ok) throw new AppError(result.status, result.message);
    return result.value;
  }

  routes.get("/", async (c) => ok(c, await findFlow(deps.sql, c.get("caller").appId)));
  routes.put("/", async (c) => {
    const flow = parseFlow(await readJson(c));
    return ok(c, await store(c.get("caller").appId, flow));
  });
  routes.delete("/", async (c) => ok(c, await store(c.get("caller").appId, null)));
  return routes;
}
