/**
 * Idempotency keys of `POST /openapi/v1/messages` (migration 0038). In the transaction that
 * stores keyed replies, their keys are claimed first; the replies' statement, sent right behind
 * the claims, stores a reply only while its key's claim is this transaction's, and settles each
 * claim with the message it stored — or gives it back when it stored none. A claim of a key that
 * another transaction holds waits for that transaction (the primary key's lock), so a retry sent
 * while the first request is still committing, from any instance, sees what the first one did.
 */
import type { Sql, Tx } from "./client.ts";
import type { SendReplyCommand } from "../actors/protocol.ts";
import { type AppendedReply, appendReplies, type ReplyInput } from "./replies.ts";
import { IDEMPOTENCY_KEY_HOURS } from "../domain/idempotency_key.ts";

/**
 * What became of a reply sent with or without a key: what {@linkcode appendReplies} says, or,
 * when an earlier request holds its key, that request's message (`replayed`), a refusal
 * (`key_reused`: that request asked something else), or `key_in_use` (that request stored
 * nothing — it was a duplicate sent at the same time as one that failed).
 */
export type OnceReply =
  | Exclude<AppendedReply, { kind: "held" }>
  | { kind: "replayed"; messageId: number }
  | { kind: "key_reused" }
  | { kind: "key_in_use" };

/**
 * {@linkcode appendReplies} for commands that may carry an Idempotency-Key: a keyed command
 * stores its reply only when its key is new (and only the first of the batch's commands with one
 * key does); the others are answered from the key's earlier use. One answer per command, in
 * order; also how many webhook events were queued.
 */
export async function appendRepliesOnce(
  tx: Tx,
  commands: SendReplyCommand[],
): Promise<{ replies: OnceReply[]; queuedEvents: number }> {
  const claims: { appId: number; key: string; fingerprint: string }[] = [];
  const inputs: ReplyInput[] = [];
  /** Per command, its input's index, or -1 when a command before it has its key. */
  const inputOf: number[] = [];
  const claimed = new Set<string>();
  for (const { kind: _, idempotency, ...input } of commands) {
    if (idempotency) {
      const name = nameOf(input.appId, idempotency.key);
      if (claimed.has(name)) {
        inputOf.push(-1);
        continue;
      }
      claimed.add(name);
      claims.push({ appId: input.appId, ...idempotency });
    }
    inputOf.push(inputs.length);
    inputs.push({ ...input, idempotencyKey: idempotency?.key });
  }
  if (claims.length === 0) {
    return appendReplies(tx, inputs) as Promise<{ replies: OnceReply[]; queuedEvents: number }>;
  }
  // The claims go first, the replies' statement right behind them (it sees which claims are
  // this transaction's), and the keys' state right behind it: as this step left them, before any
  // later step of the batch.
  const [, { replies, queuedEvents }, uses] = await Promise.all([
    claimIdempotencyKeys(tx, claims),
    appendReplies(tx, inputs),
    findKeyUses(tx, claims),
  ]);
  return {
    replies: commands.map((command, index): OnceReply => {
      const reply = inputOf[index] === -1 ? null : replies[inputOf[index]];
      if (reply && reply.kind !== "held") return reply;
      const { key, fingerprint } = command.idempotency!;
      const use = uses.get(nameOf(command.appId, key));
      if (!use) return { kind: "key_in_use" };
      if (use.fingerprint !== fingerprint) return { kind: "key_reused" };
      return { kind: "replayed", messageId: use.messageId };
    }),
    queuedEvents,
  };
}

/** Claims each (application, key) of `claims` for this transaction, unless one holds it. */
async function claimIdempotencyKeys(
  tx: Tx,
  claims: { appId: number; key: string; fingerprint: string }[],
): Promise<void> {
  await tx`
    INSERT INTO idempotency_keys (app_id, key, fingerprint)
    SELECT * FROM unnest(
      ${claims.map((claim) => claim.appId)}::bigint[], ${claims.map((claim) => claim.key)}::text[],
      ${claims.map((claim) => claim.fingerprint)}::text[]
    )
    ON CONFLICT (app_id, key) DO NOTHING`;
}

/** The settled uses of the keys of `claims`, by {@linkcode nameOf}. */
async function findKeyUses(
  tx: Tx,
  claims: { appId: number; key: string }[],
): Promise<Map<string, { fingerprint: string; messageId: number }>> {
  const rows = await tx<{ app_id: number; key: string; fingerprint: string; message_id: number }[]>`
    SELECT k.app_id, k.key, k.fingerprint, k.message_id
    FROM idempotency_keys k
    JOIN unnest(${claims.map((claim) => claim.appId)}::bigint[],
      ${claims.map((claim) => claim.key)}::text[]) AS c (app_id, key)
      ON k.app_id = c.app_id AND k.key = c.key
    WHERE k.message_id IS NOT NULL`;
  return new Map(
    rows.map((row) => [
      nameOf(row.app_id, row.key),
      { fingerprint: row.fingerprint, messageId: row.message_id },
    ]),
  );
}

function nameOf(appId: number, key: string): string {
  return `${appId} ${key}`;
}

/** Deletes the keys older than {@linkcode IDEMPOTENCY_KEY_HOURS}; resolves to their count. */
export async function sweepIdempotencyKeys(sql: Sql): Promise<number> {
  const rows = await sql`
    DELETE FROM idempotency_keys
    WHERE created_at < clock_timestamp() - make_interval(hours => ${IDEMPOTENCY_KEY_HOURS})
    RETURNING 1`;
  return rows.length;
}
