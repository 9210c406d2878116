/**
 * What a write batch must know about its applications before it can finish: their Flows (a
 * started conversation or an accepted click moves them) and whether they mirror to Slack (every
 * new message and changed conversation is queued for the Slack sender). One statement, sent with
 * the batch's first flight.
 */
import type { Tx } from "./client.ts";
import type { Flow } from "../domain/flow.ts";

/** The batch's applications that have a Flow, and those installed in Slack. */
export interface BatchContext {
  flows: Map<number, Flow>;
  slackApps: Set<number>;
}

/** Loads the context of `appIds`. */
export async function loadBatchContext(sql: Tx, appIds: number[]): Promise<BatchContext> {
  const rows = await sql<{ app_id: number; definition: Flow | null; slack: boolean }[]>`
    SELECT a.id AS app_id, f.definition, s.app_id IS NOT NULL AS slack
    FROM unnest(${appIds}::bigint[]) AS a (id)
    LEFT JOIN flows f ON f.app_id = a.id
    LEFT JOIN slack_installations s ON s.app_id = a.id
    WHERE f.app_id IS NOT NULL OR s.app_id IS NOT NULL`;
  const flows = new Map<number, Flow>();
  const slackApps = new Set<number>();
  for (const row of rows) {
    if (row.definition !== null) flows.set(row.app_id, row.definition);
    if (row.slack) slackApps.add(row.app_id);
  }
  return { flows, slackApps };
}
