/**
 * Where a write batch must be cut so that every command sees the Flow steps caused before it.
 * Flow steps run after all of a batch's statements (see `write_batch.ts`), so a command — or an
 * update of a WhatsApp delivery — that wrote to a conversation in which an earlier one made the
 * Flow take a step ran before that step: a visitor's second message went into the conversation
 * the Flow's start was about to close, or before its welcome message; a customer's message sent
 * behind a click in the same delivery, before the click's step. Such a batch is rolled back and
 * committed in segments, cut before each such command or update. Pure: no I/O.
 */
import type { AppCommand, CommandResult, WhatsAppInboundCommand } from "../actors/protocol.ts";
import { UNAVAILABLE } from "../actors/commit_loop.ts";
import type { FlowEffect, FlowTrigger } from "./flow_runs.ts";
import { advanceFlow, type Flow, startFlow } from "../domain/flow.ts";

/** What a command, or one update of a WhatsApp delivery, did: its conversations and triggers. */
export interface Part {
  chatId?: number;
  chatChanged?: number;
  changes?: FlowEffect[];
  flowTrigger?: FlowTrigger;
  flowTriggers?: FlowTrigger[];
}

/** Where a batch is cut: before update `entry` of command `command` (0: before the command). */
export interface Cut {
  command: number;
  entry: number;
}

/** A segment's commands, each with the index of the batch's command it is (or is part of). */
export type Segment = { command: AppCommand; origin: number }[];

/** The Flows in force after a `flow.set` command. */
export function flowsAfter(
  flows: Map<number, Flow>,
  command: Extract<AppCommand, { kind: "flow.set" }>,
): Map<number, Flow> {
  const after = new Map(flows);
  if (command.flow === null) after.delete(command.appId);
  else after.set(command.appId, command.flow);
  return after;
}

/** The Flow triggers of a command or an update. */
export function triggersOf(part: Part): FlowTrigger[] {
  const triggers = part.flowTriggers ?? [];
  return part.flowTrigger ? [part.flowTrigger, ...triggers] : triggers;
}

/** The conversations a command, or an update, wrote to or changed. */
function chatsOf(part: Part): number[] {
  const chats: number[] = [];
  for (const change of [part, ...part.changes ?? []]) {
    if (change.chatId !== undefined) chats.push(change.chatId);
    if (change.chatChanged !== undefined) chats.push(change.chatChanged);
  }
  for (const change of part.changes ?? []) {
    if (change.edited) chats.push(change.edited.chatId);
  }
  return chats;
}

/**
 * Every cut the batch's statements show, in order (`partsOf(i)`: what command `i` did, one part
 * per update of a WhatsApp delivery): before each command or update that wrote to a conversation
 * where the Flow took a step since the last cut. Past the first cut the statements ran without
 * the steps before them, so the later cuts are a plan, not a proof: a segment that still needs a
 * cut finds it when it commits (its own batch is checked the same way), and one cut too many only
 * costs a transaction. Cutting everywhere at once keeps a batch with many such commands (a
 * backlog of deliveries, each a customer's first two messages) to one transaction per segment,
 * where cutting at the first and running the rest again cost a transaction per cut for every
 * command behind it.
 */
export function flowStepCuts(
  commands: AppCommand[],
  partsOf: (index: number) => Part[],
  loaded: Map<number, Flow>,
): Cut[] {
  let flows = loaded;
  let stepped = new Set<number>();
  const cuts: Cut[] = [];
  for (let index = 0; index < commands.length; index++) {
    const command = commands[index];
    if (command.kind === "flow.set") {
      flows = flowsAfter(flows, command);
      continue;
    }
    const parts = partsOf(index);
    for (let entry = 0; entry < parts.length; entry++) {
      if (stepped.size > 0 && chatsOf(parts[entry]).some((chat) => stepped.has(chat))) {
        cuts.push({ command: index, entry });
        stepped = new Set();
      }
      for (const trigger of triggersOf(parts[entry])) {
        const flow = flows.get(trigger.appId);
        if (flow === undefined) continue;
        const step = trigger.kind === "start"
          ? startFlow(flow)
          : advanceFlow(flow, trigger.node, trigger.buttonId);
        if (step !== null) stepped.add(trigger.chatId);
      }
    }
  }
  return cuts;
}

/**
 * `commands` in segments at `cuts` (in order). A delivery cut between its updates becomes one
 * command per segment; all but its last are `partial`, leaving marking the delivery processed to
 * the last.
 */
export function segmentsAt(commands: AppCommand[], cuts: Cut[]): Segment[] {
  const segments: Segment[] = [[]];
  commands.forEach((command, origin) => {
    const entries = cuts.filter((cut) => cut.command === origin).map((cut) => cut.entry);
    if (entries[0] === 0) {
      segments.push([]);
      entries.shift();
    }
    if (entries.length === 0) {
      segments[segments.length - 1].push({ command, origin });
      return;
    }
    const delivery = command as WhatsAppInboundCommand;
    const bounds = [0, ...entries, delivery.entries.length];
    for (let k = 0; k + 1 < bounds.length; k++) {
      if (k > 0) segments.push([]);
      const slice: WhatsAppInboundCommand = {
        ...delivery,
        entries: delivery.entries.slice(bounds[k], bounds[k + 1]),
      };
      if (k + 2 < bounds.length) slice.partial = true;
      segments[segments.length - 1].push({ command: slice, origin });
    }
  });
  return segments;
}

/**
 * Commits `segments` in order — the first with `first`, which may throw (nothing has committed
 * then), the others with `later`, which must not — and answers one result per command of the
 * batch (`count`): a delivery cut in parts answers how many updates its parts applied in all, or
 * the first part's failure. Once a part of a delivery failed, its later parts are not committed:
 * they leave the delivery unmarked, so recovery applies it again whole, in order (its wamids make
 * the parts that did commit no-ops), where the last part would have marked it processed with the
 * failed part's updates lost. Once a command failed retryably (the database was not
 * reached), its application's commands in later segments are not tried but answered
 * {@linkcode UNAVAILABLE}: committed, they would come before its retry.
 */
export async function commitSegments(
  count: number,
  segments: Segment[],
  first: (commands: AppCommand[]) => Promise<CommandResult[]>,
  later: (commands: AppCommand[]) => Promise<CommandResult[]>,
): Promise<CommandResult[]> {
  const joined: (CommandResult | undefined)[] = new Array(count);
  /** Applications with a command that failed retryably. */
  const unavailable = new Set<number>();
  for (const [index, segment] of segments.entries()) {
    const live = segment.filter(({ origin, command }) => {
      if (joined[origin]?.ok === false) return false;
      if (!unavailable.has(command.appId)) return true;
      joined[origin] = UNAVAILABLE;
      return false;
    });
    if (live.length === 0) continue;
    const commands = live.map((part) => part.command);
    const results = index === 0 ? await first(commands) : await later(commands);
    live.forEach(({ origin, command }, k) => {
      const before = joined[origin];
      joined[origin] = before === undefined ? results[k] : joinParts(before, results[k]);
      const result = results[k];
      if (!result.ok && result.retryable) unavailable.add(command.appId);
    });
  }
  return joined as CommandResult[];
}

function joinParts(first: CommandResult, second: CommandResult): CommandResult {
  if (!first.ok) return first;
  if (!second.ok) return second;
  const applied = (result: CommandResult) =>
    result.ok ? (result.value as { applied: number }).applied : 0;
  return { ok: true, value: { applied: applied(first) + applied(second) } };
}
