/**
 * What Slack's requests write and read (CONTRACT §6.2): the raw deliveries stored before their
 * acknowledgement, the events already applied (by `event_id`), the thread and message mappings
 * that turn a thread reply into an agent message, and the edits and deletions of mirrored
 * messages made in Slack.
 */
import type { PendingQuery, Row, Tx } from "./client.ts";
import {
  findWaitingRequests,
  insertRequests,
  type RequestTable,
  type StoredRequest,
} from "./stored_requests.ts";

/** Where Slack requests are stored, ordered per workspace. */
const REQUESTS: RequestTable = {
  table: "slack_deliveries",
  key: { column: "team_id", type: "text" },
  kinds: true,
};

/**
 * Stores requests' raw bytes before they are acknowledged, in one statement, as the instance
 * `storedBy` stored them (`scopes`: see `RequestRow`); returns their ids in order, each with the
 * requests it waits for.
 */
export function insertSlackDeliveries(
  sql: Tx,
  storedBy: number,
  deliveries: {
    kind: "event" | "action";
    teamId: string;
    body: Uint8Array;
    scopes: string[] | null;
  }[],
): Promise<StoredRequest[]> {
  return insertRequests(
    sql,
    REQUESTS,
    storedBy,
    deliveries.map(({ kind, teamId, body, scopes }) => ({ key: teamId, body, scopes, kind })),
  );
}

/** Which of workspace `teamId`'s requests `ids` are still waiting to be applied. */
export function findWaitingSlackDeliveries(
  sql: Tx,
  teamId: string,
  ids: readonly number[],
): Promise<number[]> {
  return findWaitingRequests(sql, REQUESTS, teamId, ids);
}

/** Marks a stored request applied. */
export async function markSlackDeliveryProcessed(sql: Tx, id: number): Promise<void> {
  await markSlackDeliveriesProcessed(sql, [id]);
}

/** Marks stored requests applied (in the transaction that applied them). */
export async function markSlackDeliveriesProcessed(sql: Tx, ids: number[]): Promise<void> {
  await sql`
    UPDATE slack_deliveries SET processed_at = clock_timestamp() WHERE id = ANY (${ids}::bigint[])`;
}

/** Counts a failed application of a stored request, with why. */
export async function recordSlackDeliveryFailure(
  sql: Tx,
  id: number,
  error: string,
): Promise<void> {
  await sql`
    UPDATE slack_deliveries SET attempts = attempts + 1, last_error = ${error.slice(0, 1000)}
    WHERE id = ${id}`;
}

/** The key of a workspace's event in {@linkcode claimSlackEvents}'s answer. */
export function slackEventKey(teamId: string, eventId: string): string {
  return `${teamId} ${eventId}`;
}

/**
 * Records events as applied, in one statement; answers the keys ({@linkcode slackEventKey}) of
 * those recorded now — not those recorded before, nor a repeat within `events`.
 */
export async function claimSlackEvents(
  sql: Tx,
  events: { teamId: string; eventId: string }[],
): Promise<Set<string>> {
  const rows = await sql<{ team_id: string; event_id: string }[]>`
    INSERT INTO slack_events (team_id, event_id)
    SELECT * FROM unnest(${events.map((e) => e.teamId)}::text[],
      ${events.map((e) => e.eventId)}::text[])
    ON CONFLICT DO NOTHING RETURNING team_id, event_id`;
  return new Set(rows.map((row) => slackEventKey(row.team_id, row.event_id)));
}

/** The conversation a workspace thread mirrors, or null. */
export async function findThreadConversation(
  sql: Tx,
  thread: { teamId: string; channelId: string; threadTs: string },
): Promise<{ appId: number; chatId: number } | null> {
  const [row] = await sql<{ app_id: number; conversation_id: number }[]>`
    SELECT app_id, conversation_id FROM slack_threads
    WHERE team_id = ${thread.teamId} AND channel_id = ${thread.channelId}
      AND thread_ts = ${thread.threadTs}`;
  return row ? { appId: row.app_id, chatId: row.conversation_id } : null;
}

/** The key of a Slack message in {@linkcode findKnownSlackMessages}'s answer. */
export function slackMessageKey(link: { teamId: string; channelId: string; ts: string }): string {
  return `${link.teamId} ${link.channelId} ${link.ts}`;
}

/**
 * Which of these Slack messages are known, by {@linkcode slackMessageKey}: they mirror a Parley
 * message already, or were deleted in Slack (a reply whose retry comes after its deletion stays
 * deleted).
 */
export async function findKnownSlackMessages(
  sql: Tx,
  links: { teamId: string; channelId: string; ts: string }[],
): Promise<Set<string>> {
  if (links.length === 0) return new Set();
  const rows = await sql<{ team_id: string; channel_id: string; ts: string }[]>`
    SELECT link.team_id, link.channel_id, link.ts
    FROM unnest(${links.map((l) => l.teamId)}::text[], ${links.map((l) => l.channelId)}::text[],
      ${links.map((l) => l.ts)}::text[]) AS link (team_id, channel_id, ts)
    WHERE EXISTS (
      SELECT FROM slack_messages m
      WHERE m.team_id = link.team_id AND m.channel_id = link.channel_id AND m.ts = link.ts
    ) OR EXISTS (
      SELECT FROM slack_deleted_messages d
      WHERE d.team_id = link.team_id AND d.channel_id = link.channel_id AND d.ts = link.ts
    )`;
  return new Set(
    rows.map((row) =>
      slackMessageKey({ teamId: row.team_id, channelId: row.channel_id, ts: row.ts })
    ),
  );
}

/** The conversation and visitor of an application's message, or null. */
export async function findMessageConversation(
  sql: Tx,
  appId: number,
  messageId: number,
): Promise<{ chatId: number; clientId: number } | null> {
  const [row] = await sql<{ chat_id: number; client_id: number }[]>`
    SELECT c.id AS chat_id, c.client_id
    FROM messages m JOIN conversations c ON c.app_id = m.app_id AND c.id = m.conversation_id
    WHERE m.app_id = ${appId} AND m.id = ${messageId}`;
  return row ? { chatId: row.chat_id, clientId: row.client_id } : null;
}

/**
 * Applies an edit made in Slack to a member's reply mirrored as (channel, ts): its content
 * changes when the text did, an edit into a `note:` makes it internal (`hidden`: the visitor saw
 * it and must now lose it), and `message.updated` is queued for a subscribed webhook, carrying
 * the content it announces — unless the message was a note already, which was never announced.
 * Resolves to the message changed, or null.
 */
export async function editSlackMessage(
  sql: Tx,
  appId: number,
  link: { teamId: string; channelId: string; ts: string; text: string; internal: boolean },
): Promise<
  { messageId: number; chatId: number; queuedEvents: number; hidden: boolean } | null
> {
  // A note was never announced (no message.sent), so neither are its edits.
  const event = queueMessageUpdated(
    sql,
    appId,
    "edited",
    sql`jsonb_build_object('content', r.content, 'internal', r.internal)`,
    sql`NOT r.was_internal`,
  );
  const [row] = await sql<
    { id: number; conversation_id: number; queued: number; hidden: boolean }[]
  >`
    WITH target AS (
      SELECT m.id, m.internal FROM slack_messages s
      JOIN messages m ON m.app_id = s.app_id AND m.id = s.message_id
      WHERE s.team_id = ${link.teamId} AND s.channel_id = ${link.channelId}
        AND s.ts = ANY (${slackTextKeys(link.ts)}::text[])
        AND s.app_id = ${appId} AND m.sender_type = 'agent' AND m.message_type = 'text'
        AND m.content <> ${link.text} AND m.deleted_at IS NULL
    ), edited AS (
      UPDATE messages m SET content = ${link.text}, updated_at = clock_timestamp(),
        internal = m.internal OR ${link.internal},
        hidden_at = CASE WHEN NOT m.internal AND ${link.internal} THEN clock_timestamp()
          ELSE m.hidden_at END
      FROM target t
      WHERE m.app_id = ${appId} AND m.id = t.id
      RETURNING m.id, m.conversation_id, m.content, m.internal, t.internal AS was_internal,
        NOT t.internal AND m.internal AS hidden
    ), event AS (
      ${event}
    )
    SELECT id, conversation_id, hidden, (SELECT count(*) FROM event)::int AS queued FROM edited`;
  return row
    ? {
      messageId: row.id,
      chatId: row.conversation_id,
      queuedEvents: row.queued,
      hidden: row.hidden,
    }
    : null;
}

/**
 * Makes the file messages of the member's reply mirrored as (channel, ts) internal, as its text
 * was just made a note by an edit: what the reply carried is the team's now, the visitor loses it
 * (`hidden_at`) and a subscribed webhook hears `message.updated`. Resolves to the messages hidden
 * and the events queued.
 */
export async function hideSlackReplyFiles(
  sql: Tx,
  appId: number,
  link: { teamId: string; channelId: string; ts: string },
): Promise<{ hidden: { messageId: number; chatId: number }[]; queuedEvents: number }> {
  const event = queueMessageUpdated(
    sql,
    appId,
    "hidden",
    sql`jsonb_build_object('internal', true)`,
  );
  const rows = await sql<{ id: number; conversation_id: number; queued: number }[]>`
    WITH hidden AS (
      UPDATE messages m SET internal = true, hidden_at = clock_timestamp(),
        updated_at = clock_timestamp()
      FROM slack_messages s
      WHERE s.team_id = ${link.teamId} AND s.channel_id = ${link.channelId}
        AND s.ts = ANY (${slackReplyKeys(link.ts)}::text[])
        AND s.app_id = ${appId} AND m.app_id = s.app_id AND m.id = s.message_id
        AND m.sender_type = 'agent' AND m.message_type <> 'text' AND NOT m.internal
        AND m.deleted_at IS NULL
      RETURNING m.id, m.conversation_id
    ), event AS (
      ${event}
    )
    SELECT id, conversation_id, (SELECT count(*) FROM event)::int AS queued FROM hidden
    ORDER BY id`;
  return {
    hidden: rows.map((row) => ({ messageId: row.id, chatId: row.conversation_id })),
    queuedEvents: rows[0]?.queued ?? 0,
  };
}

/** Most files of one Slack reply that become messages. */
export const MAX_SLACK_REPLY_FILES = 20;

/**
 * The keys a member's reply posted as `ts` is stored under: its first message's `ts`, the others'
 * `ts#n` (a reply with files makes a message per file; Slack attaches at most 10 to a message, and
 * at most {@linkcode MAX_SLACK_REPLY_FILES} are taken).
 */
export function slackReplyKeys(ts: string): string[] {
  return [ts, ...Array.from({ length: MAX_SLACK_REPLY_FILES }, (_, index) => `${ts}#${index + 1}`)];
}

/**
 * The key of the text message an edit gives a reply posted with files only (its files hold `ts`
 * and `ts#n`).
 */
export function addedTextKey(ts: string): string {
  return `${ts}#0`;
}

/** The keys a reply's text message can be stored under: the reply's own, or the one an edit added. */
function slackTextKeys(ts: string): string[] {
  return [ts, addedTextKey(ts)];
}

/**
 * Deletes the member's reply mirrored as (channel, ts), every message it made (its text and its
 * files) — or, `textOnly`, its text alone (an edit that removed the text of a reply with files);
 * resolves to them — each with whether it was an internal note, which the visitor never had and
 * so must not hear of, and the first with the events queued: `message.updated` with the message
 * `deleted`, for a subscribed webhook, of each that was not a note. A whole message's deletion is
 * remembered (see {@linkcode findKnownSlackMessages}), also when nothing mirrored it yet.
 */
export async function deleteSlackMessage(
  sql: Tx,
  appId: number,
  link: { teamId: string; channelId: string; ts: string; textOnly?: boolean },
): Promise<{ messageId: number; chatId: number; internal: boolean; queuedEvents: number }[]> {
  const keys = link.textOnly
    ? slackTextKeys(link.ts)
    : [...slackReplyKeys(link.ts), addedTextKey(link.ts)];
  // A note was never announced (no message.sent), so neither is its deletion.
  const event = queueMessageUpdated(
    sql,
    appId,
    "deleted",
    sql`jsonb_build_object('deleted', true)`,
    sql`NOT r.internal`,
  );
  const rows = await sql<
    { id: number; conversation_id: number; internal: boolean; queued: number }[]
  >`
    WITH remembered AS (
      INSERT INTO slack_deleted_messages (team_id, channel_id, ts)
      SELECT ${link.teamId}, ${link.channelId}, ${link.ts} WHERE ${!link.textOnly}
      ON CONFLICT DO NOTHING
    ), deleted AS (
      UPDATE messages m SET deleted_at = clock_timestamp()
      FROM slack_messages s
      WHERE s.team_id = ${link.teamId} AND s.channel_id = ${link.channelId}
        AND s.ts = ANY (${keys}::text[])
        AND s.app_id = ${appId} AND m.app_id = s.app_id AND m.id = s.message_id
        AND m.sender_type = 'agent' AND m.deleted_at IS NULL
        AND (${!link.textOnly} OR m.message_type = 'text')
      RETURNING m.id, m.conversation_id, m.internal
    ), event AS (
      ${event}
    )
    -- The remembered step runs though nothing reads it: PostgreSQL runs every data-modifying step.
    SELECT id, conversation_id, internal, (SELECT count(*) FROM event)::int AS queued FROM deleted
    ORDER BY id`;
  return rows.map((row, index) => ({
    messageId: row.id,
    chatId: row.conversation_id,
    internal: row.internal,
    queuedEvents: index === 0 ? row.queued : 0,
  }));
}

/**
 * Whether the member's reply mirrored as (channel, ts) stands without text (posted with files
 * only, or its text removed), so that an edit giving it text makes a new message under
 * {@linkcode addedTextKey}; a removed text's key is freed for it.
 */
export async function isTextlessSlackReply(
  sql: Tx,
  appId: number,
  link: { teamId: string; channelId: string; ts: string },
): Promise<boolean> {
  const [row] = await sql<{ textless: boolean }[]>`
    WITH parts AS (
      SELECT s.ts, m.message_type, m.deleted_at IS NULL AS live, m.id
      FROM slack_messages s JOIN messages m ON m.app_id = s.app_id AND m.id = s.message_id
      WHERE s.team_id = ${link.teamId} AND s.channel_id = ${link.channelId}
        AND s.ts = ANY (${[...slackReplyKeys(link.ts), addedTextKey(link.ts)]}::text[])
        AND s.app_id = ${appId} AND m.sender_type = 'agent'
    ), verdict AS (
      SELECT bool_or(live) AND NOT coalesce(bool_or(live AND message_type = 'text'), false)
        AS textless FROM parts
    ), freed AS (
      DELETE FROM slack_messages s
      WHERE (SELECT textless FROM verdict) AND s.team_id = ${link.teamId}
        AND s.channel_id = ${link.channelId} AND s.ts = ${addedTextKey(link.ts)}
    )
    -- The freed step runs though nothing reads it: PostgreSQL runs every data-modifying WITH step.
    SELECT coalesce((SELECT textless FROM verdict), false) AS textless`;
  return row.textless;
}

/**
 * The `INSERT` (a `WITH` step) queueing `message.updated`, for a subscribed webhook, of the
 * messages of application `appId` in CTE `rows` (columns `id`, `conversation_id`; aliased `r`)
 * that `announced` keeps, each carrying `changed` — what its event announces of it.
 */
function queueMessageUpdated(
  sql: Tx,
  appId: number,
  rows: string,
  changed: PendingQuery<Row[]>,
  announced: PendingQuery<Row[]> = sql`true`,
): PendingQuery<Row[]> {
  return sql`
    INSERT INTO outbox (app_id, kind, topic, payload)
    SELECT ${appId}, 'webhook', 'message.updated',
      jsonb_build_object('conversation_id', r.conversation_id, 'message_id', r.id,
        'changed', ${changed})
    FROM ${sql(rows)} r JOIN webhooks w ON w.app_id = ${appId} AND w.enabled
      AND 'message.updated' = ANY (w.events)
    WHERE ${announced}
    ORDER BY r.id
    RETURNING 1`;
}
