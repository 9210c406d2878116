/**
 * The write transaction of the actors: a batch of application commands committed together.
 * It locks every application of the batch (in id order, so instances never deadlock), sends
 * the commands as statements pipelined on the connection in batch order, announces what
 * changed with one NOTIFY, and commits. Every step is a single statement on purpose: the
 * server runs them in the order sent, so a command sees the effects of the ones before it
 * without a round trip per command. Consecutive visitor messages share one set-based
 * statement, and so do consecutive replies, because per-statement overhead, not rows, is what PostgreSQL spends its time on.
 */
import type { Sql, Tx } from "./client.ts";
import type {
  AppCommand,
  CommandResult,
  SendReplyCommand,
  SendVisitorMessageCommand,
} from "../actors/protocol.ts";
import { insertVisitor } from "./visitors.ts";
import { appendVisitorMessages } from "./messages.ts";
import { type AppendedReply, appendReplies } from "./replies.ts";
import { closeConversation } from "./conversations.ts";
import { replaceWebhook } from "./webhooks.ts";
import { type ChangeNotice, CHANGES_CHANNEL, encodeChangeNotice } from "../domain/change_notice.ts";

/** What one command did, for its caller and for the batch's change notice. */
interface Outcome {
  result: CommandResult;
  /** The message the command created. */
  messageId?: number;
  /** A conversation whose state the command changed (created, closed). */
  chatChanged?: number;
}

/** Executes `commands` in order in one transaction; one result per command, same order. */
export async function commitBatch(sql: Sql, commands: AppCommand[]): Promise<CommandResult[]> {
  const appIds = [...new Set(commands.map((command) => command.appId))].sort((a, b) => a - b);
  const conn = await sql.reserve();
  try {
    // Queries start when executed and go out in that order, pipelined: BEGIN, the locks and
    // every step leave in one flight, and the NOTIFY and COMMIT in a second one.
    const begun = conn`BEGIN`.execute();
    const locked = conn`SELECT pg_advisory_xact_lock(id) FROM unnest(${appIds}::bigint[]) AS id`
      .execute();
    const pending = planSteps(commands).map((step) => execute(conn, step));
    let outcomes: Outcome[];
    try {
      await begun;
      await locked;
      outcomes = (await Promise.all(pending)).flat();
    } catch (error) {
      await Promise.allSettled(pending);
      await conn`ROLLBACK`;
      throw error;
    }
    const notice = changeNotice(commands, outcomes);
    const notified = notice
      ? conn`SELECT pg_notify(${CHANGES_CHANNEL}, payload)
          FROM unnest(${encodeChangeNotice(notice)}::text[]) AS payload`.execute()
      : null;
    const committed = conn`COMMIT`.execute();
    try {
      await notified;
    } finally {
      await committed;
    }
    return outcomes.map((outcome) => outcome.result);
  } finally {
    conn.release();
  }
}

/** One statement of a batch: a run of visitor messages or replies, or any other command. */
type Step =
  | { kind: "visitor.messages"; commands: SendVisitorMessageCommand[] }
  | { kind: "chat.replies"; commands: SendReplyCommand[] }
  | {
    kind: "single";
    command: Exclude<AppCommand, SendVisitorMessageCommand | SendReplyCommand>;
  };

/** Groups consecutive visitor messages and consecutive replies; keeps batch order. */
function planSteps(commands: AppCommand[]): Step[] {
  const steps: Step[] = [];
  for (const command of commands) {
    const last = steps.at(-1);
    if (command.kind === "visitor.message") {
      if (last?.kind === "visitor.messages") last.commands.push(command);
      else steps.push({ kind: "visitor.messages", commands: [command] });
    } else if (command.kind === "chat.reply") {
      if (last?.kind === "chat.replies") last.commands.push(command);
      else steps.push({ kind: "chat.replies", commands: [command] });
    } else {
      steps.push({ kind: "single", command });
    }
  }
  return steps;
}

/** Runs one step; one outcome per command of the step, in order. */
function execute(tx: Tx, step: Step): Promise<Outcome[]> {
  if (step.kind === "visitor.messages") {
    return appendVisitorMessages(tx, step.commands).then((appended) =>
      appended.map((message): Outcome =>
        message
          ? {
            result: {
              ok: true,
              value: { chat_id: message.chatId, message_id: message.messageId },
            },
            messageId: message.messageId,
            chatChanged: message.started ? message.chatId : undefined,
          }
          : { result: { ok: false, status: 404, message: "Visitor not found" } }
      )
    );
  }
  if (step.kind === "chat.replies") {
    return appendReplies(tx, step.commands).then((appended) => appended.map(replyOutcome));
  }
  const command = step.command;
  switch (command.kind) {
    case "visitor.create":
      return insertVisitor(tx, command).then((clientId) => [{
        result: { ok: true, value: { client_id: clientId } },
      }]);
    case "webhook.configure":
      return replaceWebhook(tx, command.appId, {
        url: command.url,
        events: command.events,
        enabled: command.enabled,
      }, command.newSecretSealed).then((stored) => [{ result: { ok: true, value: stored } }]);
    case "chat.close":
      return closeConversation(tx, command.appId, command.chatId).then((closed) => [
        closed
          ? {
            result: { ok: true, value: closed.conversation },
            chatChanged: closed.changed ? closed.conversation.id : undefined,
          }
          : { result: { ok: false, status: 404, message: "Conversation not found" } },
      ]);
  }
}

function replyOutcome(reply: AppendedReply): Outcome {
  switch (reply.kind) {
    case "stored":
      return {
        result: { ok: true, value: { message_id: reply.messageId } },
        messageId: reply.messageId,
        chatChanged: reply.reopened ? reply.chatId : undefined,
      };
    case "not_found":
      return { result: { ok: false, status: 404, message: "Conversation not found" } };
    case "outside_window":
      return {
        result: {
          ok: false,
          status: 422,
          message: "Outside the 24-hour window: only template messages can be sent",
        },
      };
  }
}

function changeNotice(commands: AppCommand[], outcomes: Outcome[]): ChangeNotice | null {
  const apps = new Set<number>();
  let min = Infinity;
  let max = -Infinity;
  const chats: [number, number][] = [];
  outcomes.forEach((outcome, index) => {
    const appId = commands[index].appId;
    if (outcome.messageId !== undefined) {
      apps.add(appId);
      min = Math.min(min, outcome.messageId);
      max = Math.max(max, outcome.messageId);
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
