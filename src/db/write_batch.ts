/**
 * The write transaction of the actors: a batch of application commands committed together.
 * It locks every application of the batch (in id order, so instances never deadlock), sends
 * each command as one statement, pipelined on the connection in batch order, announces what
 * changed with one NOTIFY, and commits. Commands are single statements on purpose: the
 * server runs them in the order sent, so a command sees the effects of the ones before it
 * without a round trip per command.
 */
import type { Sql, Tx } from "./client.ts";
import type { AppCommand, CommandResult } from "../actors/protocol.ts";
import { insertVisitor } from "./visitors.ts";
import { appendVisitorMessage } from "./messages.ts";
import { closeConversation } from "./conversations.ts";
import { type ChangeNotice, CHANGES_CHANNEL, encodeChangeNotice } from "../domain/change_notice.ts";

/** What one command did, for its caller and for the batch's change notice. */
interface Outcome {
  result: CommandResult;
  /** Messages the command created. */
  messageIds?: number[];
  /** A conversation whose state the command changed (created, closed). */
  chatChanged?: number;
}

/** Executes `commands` in order in one transaction; one result per command, same order. */
export async function commitBatch(sql: Sql, commands: AppCommand[]): Promise<CommandResult[]> {
  const appIds = [...new Set(commands.map((command) => command.appId))].sort((a, b) => a - b);
  return await sql.begin(async (tx) => {
    // Lazy queries start when awaited: issue the lock first, then every command, so that they
    // go out in this order, pipelined, and the server runs them in this order.
    const locked = tx`SELECT pg_advisory_xact_lock(id) FROM unnest(${appIds}::bigint[]) AS id`
      .execute();
    const pending = commands.map((command) => execute(tx, command));
    await locked;
    const outcomes = await Promise.all(pending);
    const notice = changeNotice(commands, outcomes);
    if (notice) {
      const payloads = encodeChangeNotice(notice);
      await tx`SELECT pg_notify(${CHANGES_CHANNEL}, payload) FROM unnest(${payloads}::text[]) AS payload`;
    }
    return outcomes.map((outcome) => outcome.result);
  });
}

function execute(tx: Tx, command: AppCommand): Promise<Outcome> {
  switch (command.kind) {
    case "visitor.create":
      return insertVisitor(tx, command).then((clientId) => ({
        result: { ok: true, value: { client_id: clientId } },
      }));
    case "visitor.message":
      return appendVisitorMessage(tx, command).then((appended) =>
        appended
          ? {
            result: {
              ok: true,
              value: { chat_id: appended.chatId, message_id: appended.messageId },
            },
            messageIds: [appended.messageId],
            chatChanged: appended.started ? appended.chatId : undefined,
          }
          : { result: { ok: false, status: 404, message: "Visitor not found" } }
      );
    case "chat.close":
      return closeConversation(tx, command.appId, command.chatId).then((closed) =>
        closed
          ? {
            result: { ok: true, value: closed.conversation },
            chatChanged: closed.changed ? closed.conversation.id : undefined,
          }
          : { result: { ok: false, status: 404, message: "Conversation not found" } }
      );
  }
}

function changeNotice(commands: AppCommand[], outcomes: Outcome[]): ChangeNotice | null {
  const apps = new Set<number>();
  let min = Infinity;
  let max = -Infinity;
  const chats: [number, number][] = [];
  outcomes.forEach((outcome, index) => {
    const appId = commands[index].appId;
    for (const id of outcome.messageIds ?? []) {
      apps.add(appId);
      min = Math.min(min, id);
      max = Math.max(max, id);
    }
    if (outcome.chatChanged !== undefined) {
      apps.add(appId);
      chats.push([appId, outcome.chatChanged]);
    }
  });
  if (apps.size === 0) return null;
  const notice: ChangeNotice = { a: [...apps] };
  if (min <= max) notice.m = [min, max];
  if (chats.length > 0) notice.c = chats;
  return notice;
}
