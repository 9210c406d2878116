/**
 * What a WhatsApp webhook delivery writes (CONTRACT §6.1): customers' messages into the same
 * conversations, outbox and notices as the widget's, clicks into the Flow's entry point, and
 * status receipts onto Parley's outbound messages. One statement per update, so that a delivery
 * runs pipelined in the actors' batch; every statement is idempotent by WhatsApp's ids, because
 * Meta delivers the same update again for days when it misses an answer.
 */
import type { Sql, Tx } from "./client.ts";
import type { WhatsAppInboundEntry } from "../actors/protocol.ts";
import { queueNotDelivered } from "./slack_mirror.ts";
import {
  findWaitingRequests,
  insertRequests,
  type RequestTable,
  type StoredRequest,
} from "./stored_requests.ts";

type MessageEntry = Extract<WhatsAppInboundEntry, { kind: "message" }>;
type ClickEntry = Extract<WhatsAppInboundEntry, { kind: "click" }>;
type StatusEntry = Extract<WhatsAppInboundEntry, { kind: "status" }>;
type IdentityEntry = Extract<WhatsAppInboundEntry, { kind: "identity" }>;

/** What storing a customer's message did; null when its wamid was already stored. */
export interface StoredInbound {
  chatId: number;
  messageId: number;
  /** Whether it opened the conversation. */
  started: boolean;
}

/** A customer's message to store, and the application it came to. */
export type WhatsAppMessageInput = MessageEntry & { appId: number };

/**
 * The key that groups `inputs` by sender within one statement: the WhatsApp id, else the BSUID
 * (prefixed, so that it never equals a phone number).
 */
function senderKey(input: WhatsAppMessageInput): string {
  return input.waId ?? `user:${input.userId}`;
}

/**
 * Stores customers' messages, in input order, in one statement: each customer becomes (or is)
 * the client known by their `wa_id` (identity `whatsapp`) or else by their BSUID (identity
 * `whatsapp_user`); whichever of the two ids the client lacks is added to it, so a user who
 * writes once without their phone number and once with it stays one client (a sender known by
 * BSUID alone whom no client knows is the customer a sender of the same run names with that
 * BSUID and a number). A new client's ids are inserted without `ON CONFLICT`: should another
 * instance have made the same customer meanwhile, the statement fails rather than leave a second
 * client without identity, and the delivery is applied again. A profile name
 * fills an empty name. Each message goes into its client's open WhatsApp conversation or a new
 * one (all messages of one client share it), keeps the platform's timestamp and the message it
 * quotes (`replyToWamid`, when found in that conversation, stored before or by the same run;
 * else none) and the ad it came from
 * (`referral`), moves the
 * conversation's last inbound time (which the 24-hour window counts from) and queues
 * `chat.started` and `message.received` for a subscribed webhook; a media id is recorded for the
 * media proxy. A wamid already stored, or met earlier in the input, changes nothing: its result is
 * null. One statement for a whole run of messages, because PostgreSQL's cost is per statement far
 * more than per row.
 */
export async function storeWhatsAppMessages(
  sql: Tx,
  inputs: WhatsAppMessageInput[],
): Promise<{ stored: (StoredInbound | null)[]; queuedEvents: number }> {
  const rows = await sql<
    { n: number; chat_id: number; message_id: number; started: boolean; queued: number }[]
  >`
    WITH stamp AS (
      SELECT clock_timestamp() AS at
    ), input AS (
      SELECT * FROM unnest(
        ${inputs.map((i) => i.appId)}::bigint[], ${inputs.map(senderKey)}::text[],
        ${inputs.map((i) => i.waId)}::text[], ${inputs.map((i) => i.userId)}::text[],
        ${inputs.map((i) => i.name)}::text[], ${inputs.map((i) => i.wamid)}::text[],
        ${inputs.map((i) => i.timestamp)}::timestamptz[], ${
    inputs.map((i) => i.messageType)
  }::text[],
        ${inputs.map((i) => i.content)}::text[],
        ${inputs.map((i) => i.payload == null ? null : JSON.stringify(i.payload))}::text[],
        ${inputs.map((i) => i.mediaId ?? null)}::text[],
        ${inputs.map((i) => i.replyToWamid ?? null)}::text[],
        ${inputs.map((i) => i.referral == null ? null : JSON.stringify(i.referral))}::text[]
      ) WITH ORDINALITY AS input (app_id, key, wa_id, user_id, name, wamid, sent_at, message_type,
        content, payload, media_id, reply_wamid, referral, n)
    ), fresh AS (
      -- The first of each wamid, unless it is stored. LATERAL keeps every lookup an index probe:
      -- a generic plan guesses 100 input rows and would otherwise hash whole tables.
      SELECT DISTINCT ON (i.app_id, i.wamid) i.*
      FROM input i
      LEFT JOIN LATERAL (
        SELECT 1 AS found FROM messages m
        WHERE m.app_id = i.app_id AND m.external_id = i.wamid LIMIT 1
      ) stored ON true
      WHERE stored.found IS NULL
      ORDER BY i.app_id, i.wamid, i.n
    ), sender AS (
      -- A time to come (a sender's clock ahead) opens the 24-hour window no longer than now.
      SELECT app_id, key, max(wa_id) AS wa_id, max(user_id) AS user_id,
        LEAST(max(sent_at), (SELECT at FROM stamp)) AS last_sent,
        (array_agg(name ORDER BY n) FILTER (WHERE name IS NOT NULL))[1] AS name
      FROM fresh GROUP BY app_id, key
    ), known AS (
      -- Every step carries its sender's columns along: a join back to sender would be a
      -- nested loop over both (a generic plan guesses one row each). The phone number wins over
      -- a BSUID that names another client.
      SELECT s.app_id, s.key, s.wa_id, s.user_id, s.name, s.last_sent, k.client_id
      FROM sender s
      CROSS JOIN LATERAL (
        SELECT client_id FROM client_identities ci
        WHERE ci.app_id = s.app_id
          AND (ci.channel = 'whatsapp' AND ci.external_id = s.wa_id
            OR ci.channel = 'whatsapp_user' AND ci.external_id = s.user_id)
        ORDER BY ci.channel = 'whatsapp' DESC
        LIMIT 1
      ) k
    ), borrowed AS (
      -- A sender named by BSUID alone whom no client knows, whose BSUID a sender of this run
      -- names with a phone number: that sender's customer.
      SELECT DISTINCT ON (s.app_id, s.key) s.app_id, s.key, s.wa_id, s.user_id, s.last_sent,
        p.key AS via
      FROM sender s
      JOIN sender p ON p.app_id = s.app_id AND p.user_id = s.user_id AND p.wa_id IS NOT NULL
      WHERE s.wa_id IS NULL
        AND NOT EXISTS (SELECT 1 FROM known k WHERE k.app_id = s.app_id AND k.key = s.key)
      ORDER BY s.app_id, s.key, p.key
    ), missing AS (
      SELECT s.app_id, s.key, s.wa_id, s.user_id, s.name, s.last_sent,
        row_number() OVER (ORDER BY s.app_id, s.key) AS k
      FROM sender s
      WHERE NOT EXISTS (SELECT 1 FROM known k WHERE k.app_id = s.app_id AND k.key = s.key)
        AND NOT EXISTS (SELECT 1 FROM borrowed b WHERE b.app_id = s.app_id AND b.key = s.key)
    ), new_client AS (
      INSERT INTO clients (app_id, name)
      SELECT app_id, name FROM missing ORDER BY k
      RETURNING id
    ), created AS (
      -- The k-th id drawn belongs to the k-th missing customer: zipped as arrays.
      SELECT * FROM unnest(
        ARRAY(SELECT app_id FROM missing ORDER BY k), ARRAY(SELECT key FROM missing ORDER BY k),
        ARRAY(SELECT wa_id FROM missing ORDER BY k), ARRAY(SELECT user_id FROM missing ORDER BY k),
        ARRAY(SELECT last_sent FROM missing ORDER BY k), ARRAY(SELECT id FROM new_client ORDER BY id)
      ) AS created (app_id, key, wa_id, user_id, last_sent, client_id)
    ), named AS (
      UPDATE clients c SET name = k.name
      FROM known k
      WHERE c.app_id = k.app_id AND c.id = k.client_id AND c.name IS NULL AND k.name IS NOT NULL
    ), owner AS (
      SELECT app_id, key, wa_id, user_id, last_sent, client_id, false AS new FROM known
      UNION ALL
      SELECT app_id, key, wa_id, user_id, last_sent, client_id, true FROM created
    ), client AS (
      SELECT app_id, key, wa_id, user_id, last_sent, client_id FROM owner
      UNION ALL
      SELECT b.app_id, b.key, b.wa_id, b.user_id, b.last_sent, o.client_id
      FROM borrowed b JOIN owner o ON o.app_id = b.app_id AND o.key = b.via
    ), claimed AS (
      -- Both ids of every sender that owns a client, each id once (a new client's first), dated
      -- by Meta's clock, like the change notices that compare with them (which number is newest).
      SELECT DISTINCT ON (o.app_id, id.channel, id.external_id)
        o.app_id, id.channel, id.external_id, o.client_id, o.new, o.last_sent
      FROM owner o
      CROSS JOIN LATERAL (VALUES ('whatsapp', o.wa_id), ('whatsapp_user', o.user_id))
        AS id (channel, external_id)
      WHERE id.external_id IS NOT NULL
      ORDER BY o.app_id, id.channel, id.external_id, o.new DESC
    ), new_identity AS (
      INSERT INTO client_identities (app_id, channel, external_id, client_id, created_at)
      SELECT app_id, channel, external_id, client_id, last_sent FROM claimed WHERE new
    ), added_identity AS (
      -- A known client's other id, unless it is known already (to it, or to another client).
      INSERT INTO client_identities (app_id, channel, external_id, client_id, created_at)
      SELECT app_id, channel, external_id, client_id, last_sent FROM claimed WHERE NOT new
      ON CONFLICT DO NOTHING
    ), open_chat AS (
      SELECT cl.app_id, cl.key, cl.last_sent, c.id
      FROM client cl
      CROSS JOIN LATERAL (
        SELECT id FROM conversations c
        WHERE c.app_id = cl.app_id AND c.client_id = cl.client_id AND c.channel = 'whatsapp'
          AND c.status = 'open'
        ORDER BY c.id DESC LIMIT 1
      ) c
    ), new_chat AS (
      -- One per client: two senders may be one client (a phone number and a BSUID it knows).
      INSERT INTO conversations
        (app_id, client_id, channel, status, created_at, last_message_at, last_inbound_at)
      SELECT cl.app_id, cl.client_id, 'whatsapp', 'open', stamp.at, stamp.at, max(cl.last_sent)
      FROM client cl CROSS JOIN stamp
      WHERE NOT EXISTS (
        SELECT 1 FROM open_chat o WHERE o.app_id = cl.app_id AND o.key = cl.key
      )
      GROUP BY cl.app_id, cl.client_id, stamp.at
      RETURNING app_id, client_id, id
    ), chat AS (
      SELECT app_id, key, id, false AS new FROM open_chat
      UNION ALL
      SELECT n.app_id, cl.key, n.id, true
      FROM new_chat n JOIN client cl ON cl.app_id = n.app_id AND cl.client_id = n.client_id
    ), placed AS (
      -- Fresh inputs numbered in input order; message ids are drawn in this order. A reply quotes
      -- a message of the conversation it lands in, by the wamid of one of the parts Parley sent
      -- or of a customer's message stored before this statement; any other wamid quotes nothing.
      SELECT f.n, f.app_id, f.message_type, f.content, f.payload, f.wamid, f.sent_at, f.media_id,
        f.referral, chat.id AS chat_id,
        coalesce(
          (SELECT sp.message_id FROM whatsapp_sent_parts sp
            WHERE sp.app_id = f.app_id AND sp.wamid = f.reply_wamid AND sp.conversation_id = chat.id),
          (SELECT m.id FROM messages m
            WHERE m.app_id = f.app_id AND m.external_id = f.reply_wamid
              AND m.conversation_id = chat.id)
        ) AS reply_to,
        chat.new AND f.n = min(f.n) OVER (PARTITION BY f.app_id, chat.id) AS started,
        row_number() OVER (ORDER BY f.n) AS k
      FROM fresh f JOIN chat ON chat.app_id = f.app_id AND chat.key = f.key
    ), message AS (
      INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, payload,
        external_id, platform_timestamp, created_at, reply_to_message_id, referral)
      SELECT p.app_id, p.chat_id, 'visitor', p.message_type, p.content, p.payload::jsonb,
        p.wamid, p.sent_at, stamp.at, p.reply_to, p.referral::jsonb
      FROM placed p CROSS JOIN stamp
      ORDER BY p.k
      RETURNING id
    ), result AS (
      SELECT * FROM unnest(
        ARRAY(SELECT n FROM placed ORDER BY k), ARRAY(SELECT app_id FROM placed ORDER BY k),
        ARRAY(SELECT chat_id FROM placed ORDER BY k), ARRAY(SELECT started FROM placed ORDER BY k),
        ARRAY(SELECT id FROM message ORDER BY id)
      ) AS result (n, app_id, chat_id, started, message_id)
    ), touched AS (
      UPDATE conversations c SET last_message_at = stamp.at,
        last_inbound_at = GREATEST(c.last_inbound_at, o.last_sent)
      FROM (SELECT app_id, id, max(last_sent) AS last_sent FROM open_chat GROUP BY app_id, id) o
      CROSS JOIN stamp
      WHERE c.app_id = o.app_id AND c.id = o.id
    ), media AS (
      INSERT INTO channel_media (channel, media_id, app_id)
      SELECT 'whatsapp', media_id, app_id FROM placed WHERE media_id IS NOT NULL
      ON CONFLICT DO NOTHING
    ), events AS (
      INSERT INTO outbox (app_id, kind, topic, payload)
      SELECT r.app_id, 'webhook', topic.name,
        jsonb_build_object('conversation_id', r.chat_id, 'message_id', r.message_id,
          'conversation', jsonb_build_object('status', 'open', 'last_message_at', stamp.at))
      FROM result r CROSS JOIN stamp
      CROSS JOIN LATERAL (VALUES (1, 'chat.started'), (2, 'message.received')) AS topic (i, name)
      CROSS JOIN LATERAL (
        SELECT 1 FROM webhooks w
        WHERE w.app_id = r.app_id AND w.enabled AND topic.name = ANY (w.events) LIMIT 1
      ) subscribed
      WHERE topic.name <> 'chat.started' OR r.started
      ORDER BY r.n, topic.i
      RETURNING 1
    )
    SELECT n, chat_id, message_id, started, (SELECT count(*) FROM events)::int AS queued
    FROM result`;
  const byInput = new Map(rows.map((row) => [row.n, row]));
  const stored = inputs.map((_, index): StoredInbound | null => {
    const row = byInput.get(index + 1);
    return row ? { chatId: row.chat_id, messageId: row.message_id, started: row.started } : null;
  });
  await linkRepliesWithinRun(sql, inputs, stored);
  return { stored, queuedEvents: rows[0]?.queued ?? 0 };
}

/**
 * Links the replies of a run to the messages they quote that the same run stored (a customer
 * who answered their own message, applied together with it: a backlog after an outage, say),
 * which the run's statement could not see yet. Only then does it cost a statement.
 */
async function linkRepliesWithinRun(
  sql: Tx,
  inputs: WhatsAppMessageInput[],
  stored: (StoredInbound | null)[],
): Promise<void> {
  if (!inputs.some((input) => input.replyToWamid)) return;
  const storedByWamid = new Map<string, StoredInbound>();
  inputs.forEach((input, index) => {
    const own = stored[index];
    if (own) storedByWamid.set(`${input.appId}:${input.wamid}`, own);
  });
  const links = inputs.flatMap((input, index) => {
    const own = stored[index];
    const quoted = input.replyToWamid
      ? storedByWamid.get(`${input.appId}:${input.replyToWamid}`)
      : undefined;
    return own && quoted && quoted.chatId === own.chatId && quoted.messageId !== own.messageId
      ? [{ appId: input.appId, id: own.messageId, replyTo: quoted.messageId }]
      : [];
  });
  if (links.length === 0) return;
  await sql`
    UPDATE messages m SET reply_to_message_id = l.reply_to
    FROM unnest(${links.map((l) => l.appId)}::bigint[], ${links.map((l) => l.id)}::bigint[],
      ${links.map((l) => l.replyTo)}::bigint[]) AS l (app_id, id, reply_to)
    WHERE m.app_id = l.app_id AND m.id = l.id`;
}

/** What storing a click did; null when its wamid was already stored. */
export interface StoredClick {
  messageId: number;
  /** The Flow node whose buttons were waiting, when the click was accepted on a Flow message. */
  flowNode: string | null;
  /** Whether the click was on the message the conversation waits on (else only stored). */
  accepted: boolean;
  queuedEvents: number;
}

/**
 * Stores a customer's click on a reply button or list row as their message (the button's
 * title, with its wamid and platform timestamp), adds the id it names that the customer's client
 * lacks (their number or BSUID) and, when the conversation is open and waits on
 * exactly that message, consumes the wait like a widget click. A click that is stale stays a
 * plain message: the customer did say it, and WhatsApp has nobody to answer 409 to.
 */
export async function storeWhatsAppClick(
  sql: Tx,
  appId: number,
  entry: ClickEntry,
): Promise<StoredClick | null> {
  const [row] = await sql<
    { message_id: number; flow_node: string | null; accepted: boolean; queued: number }[]
  >`
    WITH stamp AS (
      -- A time to come is taken as now: it opens the 24-hour window no longer than a click now.
      SELECT clock_timestamp() AS at,
        LEAST(${entry.timestamp}::timestamptz, clock_timestamp()) AS sent_at
    ), chat AS (
      SELECT c.id, c.client_id, c.status, c.action_message_id, c.flow_node,
        c.reply_action_message_id
      FROM conversations c
      WHERE c.app_id = ${appId} AND c.id = ${entry.chatId} AND c.status = 'open'
        AND EXISTS (
          SELECT 1 FROM client_identities i
          WHERE i.app_id = c.app_id AND i.client_id = c.client_id
            AND (i.channel = 'whatsapp' AND i.external_id = ${entry.waId}::text
              OR i.channel = 'whatsapp_user' AND i.external_id = ${entry.userId}::text)
        )
        AND NOT EXISTS (
          SELECT 1 FROM messages WHERE app_id = ${appId} AND external_id = ${entry.wamid}
        )
      FOR UPDATE OF c
    ), touched AS (
      -- One update of the conversation: two in one statement update its row once (the second
      -- is skipped), and a click then moved neither its activity nor the 24-hour window. As on
      -- the web (acceptAction), a click on the step the Flow waits on moves the Flow on; one on
      -- another button the conversation waits on only consumes that wait.
      UPDATE conversations c SET last_message_at = stamp.at,
        last_inbound_at = GREATEST(c.last_inbound_at, stamp.sent_at),
        action_message_id = CASE WHEN step.flow_step THEN NULL ELSE c.action_message_id END,
        flow_node = CASE WHEN step.flow_step THEN NULL ELSE c.flow_node END,
        reply_action_message_id = CASE WHEN step.accepted AND NOT step.flow_step THEN NULL
          ELSE c.reply_action_message_id END
      FROM chat, stamp, LATERAL (
        SELECT coalesce(${entry.messageId} IN (chat.action_message_id, chat.reply_action_message_id),
          false) AS accepted,
          coalesce(chat.action_message_id = ${entry.messageId}, false) AS flow_step
      ) step
      WHERE c.app_id = ${appId} AND c.id = chat.id
      RETURNING step.accepted, CASE WHEN step.flow_step THEN chat.flow_node END AS flow_node
    ), message AS (
      INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content,
        external_id, platform_timestamp, created_at)
      SELECT ${appId}, chat.id, 'visitor', 'text', ${entry.title}, ${entry.wamid}, stamp.sent_at,
        stamp.at
      FROM chat, stamp
      RETURNING id
    ), added_identity AS (
      -- As for a message: a click naming the customer's other id (a number shared since, say)
      -- adds it, unless it is known already (to them, or to another client).
      INSERT INTO client_identities (app_id, channel, external_id, client_id, created_at)
      SELECT ${appId}, id.channel, id.external_id, chat.client_id, stamp.sent_at
      FROM chat, stamp
      CROSS JOIN (VALUES ('whatsapp', ${entry.waId}::text), ('whatsapp_user', ${entry.userId}::text))
        AS id (channel, external_id)
      WHERE id.external_id IS NOT NULL
      ON CONFLICT DO NOTHING
    ), event AS (
      INSERT INTO outbox (app_id, kind, topic, payload)
      SELECT ${appId}, 'webhook', 'message.received',
        jsonb_build_object('conversation_id', ${entry.chatId}::bigint, 'message_id', message.id,
          'conversation', jsonb_build_object('status', 'open', 'last_message_at', stamp.at))
      FROM message CROSS JOIN stamp JOIN webhooks w ON w.app_id = ${appId} AND w.enabled
        AND 'message.received' = ANY (w.events)
      RETURNING 1
    )
    SELECT message.id AS message_id, (SELECT flow_node FROM touched) AS flow_node,
      coalesce((SELECT accepted FROM touched), false) AS accepted,
      (SELECT count(*) FROM event)::int AS queued
    FROM message`;
  return row
    ? {
      messageId: row.message_id,
      flowNode: row.flow_node,
      accepted: row.accepted,
      queuedEvents: row.queued,
    }
    : null;
}

/**
 * Adds a customer's new number and BSUID (Meta's `system` notice) to the client known by their
 * old ones, so that their next message continues that client and its open conversation, and
 * replies go to the new number (the newest; one the client had before becomes the newest again).
 * The old ids stay: a message sent before the change may still arrive. An id already another
 * client's is left to it. Resolves to how many ids were added or renewed (0 for an unknown
 * customer).
 */
export async function addWhatsAppIdentities(
  sql: Tx,
  appId: number,
  entry: IdentityEntry,
): Promise<number> {
  const rows = await sql`
    WITH client AS (
      SELECT client_id FROM client_identities
      WHERE app_id = ${appId}
        AND (channel = 'whatsapp' AND external_id = ${entry.waId}::text
          OR channel = 'whatsapp_user' AND external_id = ${entry.userId}::text)
      ORDER BY channel = 'whatsapp' DESC
      LIMIT 1
    )
    INSERT INTO client_identities (app_id, channel, external_id, client_id, created_at)
    SELECT ${appId}, id.channel, id.external_id, client.client_id, ${entry.timestamp}::timestamptz
    FROM client
    CROSS JOIN (VALUES ('whatsapp', ${entry.newWaId}::text), ('whatsapp_user', ${entry.newUserId}::text))
      AS id (channel, external_id)
    WHERE id.external_id IS NOT NULL
    -- A number changed back is the client's already: it becomes the newest again, unless this
    -- is an older notice delivered late.
    ON CONFLICT (app_id, channel, external_id) DO UPDATE SET created_at = EXCLUDED.created_at
      WHERE client_identities.client_id = EXCLUDED.client_id
        AND client_identities.created_at < EXCLUDED.created_at
    RETURNING 1`;
  return rows.length;
}

/** What a status receipt changed; null when it moved nothing (unknown id, or not forward). */
export interface AppliedStatus {
  chatId: number;
  messageId: number;
  queuedEvents: number;
}

/**
 * Moves an outbound message's status forward only (sent → delivered → read; `failed` is final
 * and keeps the platform's error code and title), and queues `message.updated` — or
 * `message.failed` — for a subscribed webhook, carrying the status it announces (a later receipt
 * may move the message on before the delivery). A receipt that would move the status back changes
 * nothing; one for a wamid not recorded (yet: Meta's webhook can beat the answer of the send) is
 * kept, for {@linkcode applyEarlyWhatsAppStatuses} once the send is recorded.
 */
export async function applyWhatsAppStatus(
  sql: Tx,
  appId: number,
  entry: StatusEntry,
): Promise<AppliedStatus | null> {
  const [row] = await sql<{ chat_id: number; message_id: number; queued: number }[]>`
    WITH part AS (
      SELECT message_id, conversation_id FROM whatsapp_sent_parts
      WHERE app_id = ${appId} AND wamid = ${entry.wamid}
    ), early AS (
      INSERT INTO whatsapp_early_statuses (app_id, wamid, status, error_code, error_title)
      SELECT ${appId}, ${entry.wamid}, ${entry.status}, ${entry.error?.code ?? null}::int,
        ${entry.error?.title ?? null}::text
      WHERE NOT EXISTS (SELECT FROM part)
      ON CONFLICT DO NOTHING
    ), target AS (
      SELECT m.id, m.conversation_id FROM messages m, part
      WHERE m.app_id = ${appId} AND m.conversation_id = part.conversation_id
        AND m.id = part.message_id
        AND m.sender_type <> 'visitor'
        AND array_position(ARRAY['pending', 'sent', 'delivered', 'read', 'failed'],
          COALESCE(m.status, 'pending'))
          < array_position(ARRAY['pending', 'sent', 'delivered', 'read', 'failed'],
            ${entry.status}::text)
        AND m.status IS DISTINCT FROM 'failed'
    ), moved AS (
      UPDATE messages m SET status = ${entry.status}, updated_at = clock_timestamp(),
        failure_code = ${entry.error?.code ?? null}::int,
        failure_title = ${entry.error?.title ?? null}::text
      FROM target t WHERE m.app_id = ${appId} AND m.id = t.id
      RETURNING m.id, m.conversation_id
    ), event AS (
      INSERT INTO outbox (app_id, kind, topic, payload)
      SELECT ${appId}, 'webhook', topic.name,
        jsonb_build_object('conversation_id', moved.conversation_id, 'message_id', moved.id,
          'changed', jsonb_build_object('status', ${entry.status}::text,
            'failure_code', ${entry.error?.code ?? null}::int,
            'failure_title', ${entry.error?.title ?? null}::text))
      FROM moved
      CROSS JOIN (SELECT CASE WHEN ${entry.status}::text = 'failed' THEN 'message.failed'
        ELSE 'message.updated' END AS name) topic
      JOIN webhooks w ON w.app_id = ${appId} AND w.enabled AND topic.name = ANY (w.events)
      RETURNING 1
    ), failed AS (
      SELECT id, conversation_id FROM moved WHERE ${entry.status}::text = 'failed'
    ), mirror AS (
      ${queueNotDelivered(sql, appId, "failed")}
    )
    -- The early step runs though nothing reads it: PostgreSQL runs every data-modifying step.
    SELECT conversation_id AS chat_id, id AS message_id,
      ((SELECT count(*) FROM event) + (SELECT count(*) FROM mirror))::int AS queued
    FROM moved`;
  return row ? { chatId: row.chat_id, messageId: row.message_id, queuedEvents: row.queued } : null;
}

const STATUS_ORDER = ["sent", "delivered", "read", "failed"];

/**
 * Applies the receipts kept for sends recorded since they came (see
 * {@linkcode applyWhatsAppStatus}) — of `wamids` of application `appId`, or, without them, of
 * every application (a sweep for a receipt whose transaction committed just after its send's
 * record looked) — in one transaction, each message's in status order. Resolves to the
 * webhook events queued.
 */
export async function applyEarlyWhatsAppStatuses(
  sql: Sql,
  only?: { appId: number; wamids: string[] },
): Promise<number> {
  return await sql.begin(async (tx) => {
    const rows = await tx<
      {
        app_id: number;
        wamid: string;
        status: StatusEntry["status"];
        error_code: number | null;
        error_title: string | null;
      }[]
    >`
      DELETE FROM whatsapp_early_statuses e
      WHERE (${only === undefined} OR (e.app_id = ${only?.appId ?? 0}
        AND e.wamid = ANY (${only?.wamids ?? []}::text[])))
      AND EXISTS (
        SELECT FROM whatsapp_sent_parts p WHERE p.app_id = e.app_id AND p.wamid = e.wamid
      )
      RETURNING e.app_id, e.wamid, e.status, e.error_code, e.error_title`;
    rows.sort((a, b) =>
      a.app_id - b.app_id || a.wamid.localeCompare(b.wamid) ||
      STATUS_ORDER.indexOf(a.status) - STATUS_ORDER.indexOf(b.status)
    );
    let queued = 0;
    for (const row of rows) {
      const applied = await applyWhatsAppStatus(tx, row.app_id, {
        kind: "status",
        wamid: row.wamid,
        status: row.status,
        timestamp: "",
        error: row.error_code === null
          ? null
          : { code: row.error_code, title: row.error_title ?? "" },
      });
      queued += applied?.queuedEvents ?? 0;
    }
    return queued;
  });
}

/** Marks stored webhook deliveries processed (in the transaction that applied them). */
export async function markWhatsAppDeliveriesProcessed(
  sql: Tx,
  deliveries: { appId: number; deliveryId: number }[],
): Promise<void> {
  // Delivery ids are unique across applications: the pairs need no join (which a generic plan
  // could turn into a scan of the whole table), two index conditions find exactly them.
  await sql`
    UPDATE whatsapp_deliveries SET processed_at = clock_timestamp()
    WHERE app_id = ANY (${[...new Set(deliveries.map((d) => d.appId))]}::bigint[])
      AND id = ANY (${deliveries.map((d) => d.deliveryId)}::bigint[])`;
}

/** Where WhatsApp deliveries are stored, ordered per application. */
const DELIVERIES: RequestTable = {
  table: "whatsapp_deliveries",
  key: { column: "app_id", type: "bigint" },
  kinds: false,
};

/**
 * Stores webhook deliveries' raw bytes before they are acknowledged, in one statement, as the
 * instance `storedBy` stored them (`scopes`: see `RequestRow`); returns their ids in order, each
 * with the deliveries it waits for.
 */
export function insertWhatsAppDeliveries(
  sql: Tx,
  storedBy: number,
  deliveries: { appId: number; body: Uint8Array; scopes: string[] | null }[],
): Promise<StoredRequest[]> {
  return insertRequests(
    sql,
    DELIVERIES,
    storedBy,
    deliveries.map(({ appId, body, scopes }) => ({ key: appId, body, scopes })),
  );
}

/** Which of application `appId`'s deliveries `ids` are still waiting to be applied. */
export function findWaitingWhatsAppDeliveries(
  sql: Tx,
  appId: number,
  ids: readonly number[],
): Promise<number[]> {
  return findWaitingRequests(sql, DELIVERIES, appId, ids);
}

/** Counts a failed application of a stored delivery, with why. */
export async function recordWhatsAppDeliveryFailure(
  sql: Tx,
  appId: number,
  id: number,
  error: string,
): Promise<void> {
  await sql`
    UPDATE whatsapp_deliveries SET attempts = attempts + 1, last_error = ${error.slice(0, 1000)}
    WHERE app_id = ${appId} AND id = ${id}`;
}

/** An outbound message a customer's click names (by the wamid of one of its parts). */
export interface ClickTarget {
  wamid: string;
  messageId: number;
  chatId: number;
  messageType: string;
  payload: unknown;
  chatOpen: boolean;
  /** The WhatsApp ids (phone numbers) of the customer the conversation is with. */
  waIds: string[];
  /** Their business-scoped user ids. */
  userIds: string[];
}

/** The messages that the wamids of clicked messages name, for resolving their button ids. */
export async function findClickTargets(
  sql: Tx,
  appId: number,
  wamids: string[],
): Promise<ClickTarget[]> {
  if (wamids.length === 0) return [];
  const rows = await sql<
    {
      wamid: string;
      message_id: number;
      chat_id: number;
      message_type: string;
      payload: unknown;
      status: string;
      wa_ids: string[];
      user_ids: string[];
    }[]
  >`
    SELECT p.wamid, m.id AS message_id, m.conversation_id AS chat_id, m.message_type, m.payload,
      c.status,
      ARRAY(SELECT external_id FROM client_identities i
        WHERE i.app_id = c.app_id AND i.client_id = c.client_id AND i.channel = 'whatsapp'
        ORDER BY external_id) AS wa_ids,
      ARRAY(SELECT external_id FROM client_identities i
        WHERE i.app_id = c.app_id AND i.client_id = c.client_id AND i.channel = 'whatsapp_user'
        ORDER BY external_id) AS user_ids
    FROM whatsapp_sent_parts p
    JOIN messages m ON m.app_id = p.app_id AND m.conversation_id = p.conversation_id
      AND m.id = p.message_id
    JOIN conversations c ON c.app_id = m.app_id AND c.id = m.conversation_id
    WHERE p.app_id = ${appId} AND p.wamid = ANY (${wamids}::text[])`;
  return rows.map((row) => ({
    wamid: row.wamid,
    messageId: row.message_id,
    chatId: row.chat_id,
    messageType: row.message_type,
    payload: row.payload,
    chatOpen: row.status === "open",
    waIds: row.wa_ids,
    userIds: row.user_ids,
  }));
}
