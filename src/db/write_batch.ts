/**
 * STUB — being written by the lead; signature is final.
 * Commits a batch of application commands in one transaction.
 */
import type { Sql } from "./client.ts";
import type { AppCommand, CommandResult } from "../actors/protocol.ts";

/** Executes `commands` in order in one transaction; one result per command, same order. */
export function commitBatch(_sql: Sql, commands: AppCommand[]): Promise<CommandResult[]> {
  return Promise.resolve(commands.map(() => ({ ok: true, value: null })));
}
