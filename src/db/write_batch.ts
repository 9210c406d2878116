/**
 * The write transaction of the actors: a batch of application commands committed together.
 * It locks every application of the batch (in id order, so instances never deadlock), sends
 * the commands as statements pipelined on the connection in batch order, announces what
 * changed with one NOTIFY, and commits. Every step is a single statement on purpose: the
 * server runs them in the order sent, so a command sees the effects of the ones before it
 * without a round trip per command. Consecutive visitor messages share one set-based
 * statement, and so do consecutive replies, the messages of consecutive WhatsApp deliveries and
 * the replies of consecutive Slack events, because per-statement overhead, not rows, is what PostgreSQL spends its time on.
 * When the batch started conversations or accepted clicks of an application that has a Flow,
 * the Flow's steps follow in a second flight, and the Slack mirror of what changed is queued,
 * still before the NOTIFY and COMMIT.
 */
import { reserveWithin, type Sql, type Tx } from "./client.ts";
import type {
  AppCommand,
  CommandResult,
  SendReplyCommand,
  SendVisitorMessageCommand,
  SlackEventCommand,
  WhatsAppInboundCommand,
} from "../actors/protocol.ts";
import { insertVisitor } from "./visitors.ts";
import { appendVisitorMessages } from "./messages.ts";
import { appendRepliesOnce, type OnceReply } from "./idempotency_keys.ts";
import { OUTSIDE_WINDOW } from "../domain/conversation.ts";
import { IDEMPOTENCY_KEY_IN_USE, IDEMPOTENCY_KEY_REUSED } from "../domain/idempotency_key.ts";
import { closeConversation } from "./conversations.ts";
import { replaceWebhook } from "./webhooks.ts";
import { replaceFlow } from "./flows.ts";
import { loadBatchContext } from "./batch_context.ts";
import { queueSlackMirror } from "./slack_mirror.ts";
import { acceptAction, type AcceptedAction } from "./actions.ts";
import { type FlowEffect, type FlowTrigger, runFlowSteps } from "./flow_runs.ts";
import { applyWhatsAppDeliveries } from "./whatsapp_batch.ts";
import { applySlackEvents } from "./slack_batch.ts";
import { commitEachAlone, CommitOutcomeUnknown, UNAVAILABLE } from "../actors/commit_loop.ts";
import { type CommitMark, committedAfterAll, markCommitSql } from "./commit_outcome.ts";
import { describeError, log } from "../log.ts";
import { isTransientDatabaseError } from "./transient_retry.ts";
import { type ChangeNotice, CHANGES_CHANNEL, encodeChangeNotice } from "../domain/change_notice.ts";
import type { Flow } from "../domain/flow.ts";
import {
  commitSegments,
  type Cut,
  flowsAfter,
  flowStepCuts,
  segmentsAt,
  triggersOf,
} from "./batch_cuts.ts";

/** What one command did, for its caller and for the batch's change notice. */
interface Outcome {
  result: CommandResult;
  /** The message the command created. */
  messageId?: number;
  /** The conversation of `messageId`. */
  chatId?: number;
  /** A conversation whose state the command changed (created, closed). */
  chatChanged?: number;
  /** What the command means for the application's Flow. */
  flowTrigger?: FlowTrigger;
  /** Webhook events its statement queued (counted once per statement, on its first command). */
  queuedEvents?: number;
  /** What a command of many changes (a WhatsApp delivery) changed, and its Flow triggers. */
  changes?: FlowEffect[];
  flowTriggers?: FlowTrigger[];
  /** Per update of a WhatsApp delivery, what it changed and its Flow triggers. */
  updates?: { changes: FlowEffect[]; flowTriggers: FlowTrigger[] }[];
}

/**
 * The batch's Flow triggers in command order, each run with the Flows in force at its command:
 * those the batch started with, as every earlier `flow.set` of the batch replaced them (a
 * conversation started after a Flow was set in the same transaction gets that Flow). Runs
 * without triggers or without Flows are left out.
 */
function flowRuns(
  commands: AppCommand[],
  outcomes: Outcome[],
  loaded: Map<number, Flow>,
): { triggers: FlowTrigger[]; flows: Map<number, Flow> }[] {
  const runs: { triggers: FlowTrigger[]; flows: Map<number, Flow> }[] = [];
  let flows = loaded;
  let triggers: FlowTrigger[] = [];
  const close = () => {
    if (triggers.length > 0 && flows.size > 0) runs.push({ triggers, flows });
    triggers = [];
  };
  outcomes.forEach((outcome, index) => {
    const command = commands[index];
    if (command.kind === "flow.set") {
      close();
      flows = flowsAfter(flows, command);
      return;
    }
    triggers.push(...triggersOf(outcome));
  });
  close();
  return runs;
}

/** Thrown inside {@linkcode commitTogether} when the batch must be committed in segments. */
class FlowStepsAhead extends Error {
  constructor(readonly cuts: Cut[]) {
    super(`The batch must be cut in ${cuts.length + 1} segments for its Flow steps`);
  }
}

/**
 * Commits a later segment of a cut batch, whose first segment has committed: it must not throw,
 * since a caller that saw the batch fail would run the first segment's commands again. So when it
 * fails, each of its commands is tried alone, and one that fails alone answers 500 (retryable
 * when the database was not reached, and then its application's commands behind it are not tried).
 */
async function commitAfterCut(sql: Sql, commands: AppCommand[]): Promise<CommandResult[]> {
  try {
    return await commitBatch(sql, commands);
  } catch (error) {
    if (error instanceof CommitOutcomeUnknown) return commands.map(() => UNAVAILABLE);
    return await commitEachAlone(
      commands,
      async (command) => (await commitBatch(sql, [command]))[0],
      isTransientDatabaseError,
      (error) =>
        log("error", "command failed alone after a cut batch failed", describeError(error)),
    );
  }
}

/**
 * Whether an application's commands in a batch must end with `command`: a click (on the web, in
 * Slack, or in a WhatsApp delivery) drives its Flow, and Flow steps run after all the batch's
 * statements, so the commands behind it would not see what that step did — a visitor's message
 * sent just after a click that closed the conversation went into the closed one. In the next
 * batch they do.
 */
export function endsBatch(command: AppCommand): boolean {
  return command.kind === "visitor.action" ||
    (command.kind === "whatsapp.inbound" &&
      command.entries.some((entry) => entry.kind === "click"));
}

/**
 * Executes `commands` in order in one transaction — or in several, one after the other, when
 * commands must see Flow steps that earlier ones caused (see `batch_cuts.ts`); one result per
 * command, same order.
 */
export async function commitBatch(sql: Sql, commands: AppCommand[]): Promise<CommandResult[]> {
  try {
    return await commitTogether(sql, commands);
  } catch (error) {
    if (!(error instanceof FlowStepsAhead)) throw error;
    // Should the first segment fail, nothing has committed, and the error is the batch's.
    return await commitSegments(
      commands.length,
      segmentsAt(commands, error.cuts),
      (first) => commitBatch(sql, first),
      (later) => commitAfterCut(sql, later),
    );
  }
}

async function commitTogether(sql: Sql, commands: AppCommand[]): Promise<CommandResult[]> {
  const appIds = [...new Set(commands.map((command) => command.appId))].sort((a, b) => a - b);
  const conn = await reserveWithin(sql);
  try {
    // Queries start when executed and go out in that order, pipelined: BEGIN, the locks and
    // every step leave in one flight, and the NOTIFY and COMMIT in a second one.
    const begun = conn`BEGIN`.execute();
    // The transaction's mark, so that a COMMIT whose answer is lost can be asked about.
    const locked = conn<CommitMark[]>`
      WITH ${markCommitSql(conn)}
      SELECT mark.xid, mark.pid, count(pg_advisory_xact_lock(id)) AS locks
      FROM mark, unnest(${appIds}::bigint[]) AS id GROUP BY mark.xid, mark.pid`.execute();
    const contextFound = loadBatchContext(conn, appIds);
    const pending = planSteps(commands).map((step) => execute(conn, step));
    let outcomes: Outcome[];
    const flowEffects: FlowEffect[] = [];
    let changes: FlowEffect[] = [];
    let mark: CommitMark;
    try {
      await begun;
      [mark] = await locked;
      const { flows, slackApps } = await contextFound;
      outcomes = (await Promise.all(pending)).flat();
      const cuts = flowStepCuts(commands, (index) => {
        const outcome = outcomes[index];
        return outcome.updates ?? [outcome];
      }, flows);
      if (cuts.length > 0) throw new FlowStepsAhead(cuts);
      for (const { triggers, flows: inForce } of flowRuns(commands, outcomes, flows)) {
        flowEffects.push(...await runFlowSteps(conn, triggers, inForce));
      }
      changes = [
        ...outcomes.map((outcome, index) => ({ appId: commands[index].appId, ...outcome })),
        ...outcomes.flatMap((outcome) => outcome.changes ?? []),
        ...flowEffects,
      ];
      if (slackApps.size > 0) {
        const mirrored = await queueSlackMirror(conn, changes, slackApps);
        if (mirrored > 0) changes.push({ appId: appIds[0], queuedEvents: mirrored });
      }
    } catch (error) {
      // Every statement sent ahead settled (and handled) before the rollback, the lock's and
      // BEGIN's included: unhandled, their rejection ended the worker.
      await Promise.allSettled([begun, locked, contextFound, ...pending]);
      await conn`ROLLBACK`;
      throw error;
    }
    const notice = changeNotice(changes);
    const notified = notice
      ? conn`SELECT pg_notify(${CHANGES_CHANNEL}, payload)
          FROM unnest(${encodeChangeNotice(notice)}::text[]) AS payload`.execute()
      : null;
    const committed = conn`COMMIT`.execute();
    const [notifying, committing] = await Promise.allSettled([notified, committed]);
    const failure = [notifying, committing].find((one) => one.status === "rejected");
    // An error after the COMMIT left need not mean it failed (the connection lost with its
    // answer, say): retried as if it had, the batch would commit twice. The database knows.
    if (failure && !await committedAfterAll(sql, mark)) throw failure.reason;
    return outcomes.map((outcome) => outcome.result);
  } finally {
    conn.release();
  }
}

/**
 * One step of a batch: a run of visitor messages or replies (one statement each), a run of
 * WhatsApp deliveries or of Slack events (their messages set-based), or any other command.
 */
type Step =
  | { kind: "visitor.messages"; commands: SendVisitorMessageCommand[] }
  | { kind: "chat.replies"; commands: SendReplyCommand[] }
  | { kind: "whatsapp.deliveries"; commands: WhatsAppInboundCommand[] }
  | { kind: "slack.events"; commands: SlackEventCommand[] }
  | {
    kind: "single";
    command: Exclude<
      AppCommand,
      SendVisitorMessageCommand | SendReplyCommand | WhatsAppInboundCommand | SlackEventCommand
    >;
  };

/** Groups consecutive commands that share a step; keeps batch order. */
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
    } else if (command.kind === "whatsapp.inbound") {
      if (last?.kind === "whatsapp.deliveries") last.commands.push(command);
      else steps.push({ kind: "whatsapp.deliveries", commands: [command] });
    } else if (command.kind === "slack.event") {
      if (last?.kind === "slack.events") last.commands.push(command);
      else steps.push({ kind: "slack.events", commands: [command] });
    } else {
      steps.push({ kind: "single", command });
    }
  }
  return steps;
}

/** Runs one step; one outcome per command of the step, in order. */
function execute(tx: Tx, step: Step): Promise<Outcome[]> {
  if (step.kind === "visitor.messages") {
    return appendVisitorMessages(tx, step.commands).then(({ messages, queuedEvents }) =>
      withQueued(
        queuedEvents,
        messages.map((message, index): Outcome => {
          if (!message) return { result: { ok: false, status: 404, message: "Visitor not found" } };
          return {
            result: {
              ok: true,
              value: { chat_id: message.chatId, message_id: message.messageId },
            },
            messageId: message.messageId,
            chatId: message.chatId,
            chatChanged: message.started ? message.chatId : undefined,
            flowTrigger: message.started
              ? { kind: "start", appId: step.commands[index].appId, chatId: message.chatId }
              : undefined,
          };
        }),
      )
    );
  }
  if (step.kind === "chat.replies") {
    return appendRepliesOnce(tx, step.commands).then(({ replies, queuedEvents }) =>
      withQueued(queuedEvents, replies.map(replyOutcome))
    );
  }
  if (step.kind === "whatsapp.deliveries") {
    return applyWhatsAppDeliveries(tx, step.commands).then((deliveries) =>
      deliveries.map((applied) => ({
        result: { ok: true, value: { applied: applied.applied } },
        changes: applied.changes,
        flowTriggers: applied.flowTriggers,
        updates: applied.updates,
      }))
    );
  }
  if (step.kind === "slack.events") {
    return applySlackEvents(tx, step.commands).then((applied) =>
      applied.map((changes) => ({ result: { ok: true, value: null }, changes }))
    );
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
    case "flow.set":
      return replaceFlow(tx, command.appId, command.flow).then((stored) => [{
        result: { ok: true, value: stored },
      }]);
    case "visitor.action":
      return acceptAction(tx, command).then((accepted) => [actionOutcome(command, accepted)]);
    case "chat.close":
      return closeConversation(tx, command.appId, command.chatId).then((closed) => [
        closed
          ? {
            result: { ok: true, value: closed.conversation },
            chatChanged: closed.changed ? closed.conversation.id : undefined,
            queuedEvents: closed.queuedEvents,
          }
          : { result: { ok: false, status: 404, message: "Conversation not found" } },
      ]);
  }
}

/** The outcomes of one statement, its queued events counted on the first. */
function withQueued(queuedEvents: number, outcomes: Outcome[]): Outcome[] {
  if (outcomes.length > 0) outcomes[0].queuedEvents = queuedEvents;
  return outcomes;
}

function actionOutcome(
  command: { appId: number; chatId: number; actionId: string },
  accepted: AcceptedAction,
): Outcome {
  switch (accepted.kind) {
    case "accepted":
      return {
        result: { ok: true, value: { message_id: accepted.messageId } },
        messageId: accepted.messageId,
        chatId: command.chatId,
        queuedEvents: accepted.queuedEvents,
        flowTrigger: accepted.flowNode === null ? undefined : {
          kind: "click",
          appId: command.appId,
          chatId: command.chatId,
          node: accepted.flowNode,
          buttonId: command.actionId,
        },
      };
    case "not_found":
      return { result: { ok: false, status: 404, message: "Conversation not found" } };
    case "unknown_action":
      return { result: { ok: false, status: 400, message: "Unknown action" } };
    case "stale":
      return {
        result: { ok: false, status: 409, message: "This action is no longer available" },
      };
  }
}

function replyOutcome(reply: OnceReply): Outcome {
  switch (reply.kind) {
    case "stored":
      return {
        result: { ok: true, value: { message_id: reply.messageId } },
        messageId: reply.messageId,
        chatId: reply.chatId,
        chatChanged: reply.reopened ? reply.chatId : undefined,
      };
    case "not_found":
      return { result: { ok: false, status: 404, message: "Conversation not found" } };
    case "failed": // kept failed: a Flow's step (the commands' replies are refused instead)
      return {
        result: { ok: true, value: { message_id: reply.messageId } },
        messageId: reply.messageId,
        chatId: reply.chatId,
      };
    case "outside_window":
      return { result: { ok: false, status: 422, message: OUTSIDE_WINDOW } };
    case "replayed": // nothing changed: no notice, no event
      return { result: { ok: true, value: { message_id: reply.messageId }, replayed: true } };
    case "key_reused":
      return { result: { ok: false, status: 422, message: IDEMPOTENCY_KEY_REUSED } };
    case "key_in_use":
      return { result: { ok: false, status: 409, message: IDEMPOTENCY_KEY_IN_USE } };
  }
}

/** The notice of what a batch changed: its applications, message id range and conversations. */
function changeNotice(changes: FlowEffect[]): ChangeNotice | null {
  const apps = new Set<number>();
  const queued = changes.some((change) => (change.queuedEvents ?? 0) > 0);
  const edits = changes.flatMap((change): [number, number, number, 0 | 1][] =>
    change.edited
      ? [[
        change.appId,
        change.edited.chatId,
        change.edited.messageId,
        change.edited.deleted ? 1 : 0,
      ]]
      : []
  );
  edits.forEach(([appId]) => apps.add(appId));
  let min = Infinity;
  let max = -Infinity;
  const chats: [number, number][] = [];
  changes.forEach((outcome) => {
    const appId = outcome.appId;
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
  if (queued) notice.w = 1;
  if (edits.length > 0) notice.e = edits;
  return notice;
}
