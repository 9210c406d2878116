/**
 * The realtime hub of one process: it keeps the visitor WebSockets attached here, keyed by
 * application and client, and turns change notices (ids only) into JSON frames for them. A
 * notice's message range may overlap other transactions' messages and a reconnect replays
 * recent history, so the hub remembers what it already pushed and sends each message once.
 * Notices are handled one after the other, so a client's frames never overtake each other.
 */
import type { Sql } from "../db/client.ts";
import {
  type ClientChanges,
  listClientChangesSince,
  listConversationsByIds,
  listMessagesByIds,
  listMessagesInRange,
  type WatchedClient,
} from "../db/realtime.ts";
import { type ChangeNotice, decodeChangeNotice } from "../domain/change_notice.ts";
import type { Conversation, Message } from "../domain/conversation.ts";
import { describeError, log } from "../log.ts";

/** Options of {@linkcode createRealtimeHub}. */
export interface RealtimeHubOptions {
  /** The pool the hub reads messages and conversations with. */
  sql: Sql;
  /**
   * How far before the last notice seen a replay looks back, in milliseconds. It must cover
   * transactions still running when the connection dropped and the clock skew between this
   * process and PostgreSQL. @default 30_000
   */
  replayWindowMs?: number;
  /**
   * How long a socket may stay in its upgrade before the hub forgets it (Deno never opens nor
   * closes one whose client left during the upgrade), in milliseconds. @default 10_000
   */
  openDeadlineMs?: number;
  /**
   * Receives what went wrong while loading or pushing, since nobody awaits the hub's work
   * on the notification path. @default one JSON error log line
   */
  onError?: (error: unknown) => void;
}

/** Who a visitor socket belongs to. */
export interface Visitor {
  appId: number;
  clientId: number;
}

/** A frame sent to visitor sockets (CONTRACT §3). */
export type VisitorFrame =
  | { type: "message.created" | "message.updated"; chat_id: number; message: Message }
  | { type: "message.deleted"; chat_id: number; message: { id: number; chat_id: number } }
  /**
   * The conversation rides under `message`, where the contract's frame shape carries its object,
   * and under `chat`, which names it for what it is.
   */
  | { type: "chat.updated"; chat_id: number; message: Conversation; chat: Conversation };

/** The hub returned by {@linkcode createRealtimeHub}. */
export interface RealtimeHub {
  /**
   * Pushes every conversation of `who`, present and future, to `socket` until it closes. With
   * `since`, the socket first catches up on what `who` got from then until it was attached (its
   * frames, then those that arrived meanwhile, each message once).
   */
  attachVisitor(socket: WebSocket, who: Visitor, options?: { since?: Date }): void;
  /** Pushes what a NOTIFY payload announces; resolves when pushed, never rejects. */
  handleNotice(payload: string): Promise<void>;
  /**
   * Pushes what recent commits changed for the attached clients: their conversations' state,
   * the messages not pushed yet and edits, status changes and deletions (state frames may repeat
   * ones already sent). Run it after the LISTEN connection reconnects.
   */
  replay(): Promise<void>;
  /** Sockets attached and not closed yet. */
  readonly socketCount: number;
  /** Closes the attached sockets (going away) and ignores every later notice. */
  stop(): void;
}

/** How many pushed message ids the hub remembers to avoid pushing one twice. */
const REMEMBERED_MESSAGES = 100_000;

/** Waits before the reads of a notice that failed are tried again (about 2 s in all). */
const PUSH_RETRY_DELAYS_MS = [50, 200, 800, 1_000];

/** WebSocket close code of a server going away. */
const GOING_AWAY = 1001;
/** WebSocket close code of a server error (a socket's catch-up could not be read). */
const INTERNAL_ERROR_CLOSE = 1011;
/** WebSocket close code of a policy violation (too slow a reader, too many sockets). */
const POLICY_VIOLATION = 1008;

/**
 * Most bytes a socket may leave unread before it is closed: a client that does not read must
 * not make the server hold every frame sent to it. A visitor that reconnects reads its history.
 */
const MAX_UNREAD_BYTES = 1_048_576;
/** Most sockets one visitor may hold at once here; a new one closes the oldest. */
const MAX_SOCKETS_PER_VISITOR = 20;
/**
 * How long a socket may stay in its upgrade by default: Deno never opens nor closes one whose
 * client left during the upgrade, so the hub forgets it (and the frames it kept for it).
 */
const OPEN_DEADLINE_MS = 10_000;

/** How long a socket's catch-up keeps what it sent, so that its notices do not send it again. */
const REPEAT_WINDOW_MS = 10_000;

/**
 * What was sent to a socket: its messages by id, and the last frame about each conversation's
 * state and each message's edits (by {@linkcode frameKey}).
 */
interface SentFrames {
  ids: Set<number>;
  last: Map<string, string>;
}

/** A socket's catch-up (see `catchUp` in the hub). */
interface CatchUpState {
  holding: boolean;
  held: { frame: VisitorFrame; data: string }[];
  sent: SentFrames;
}

/** What a frame other than a new message is about: a conversation's state, or a message. */
function frameKey(frame: VisitorFrame): string {
  return frame.type === "chat.updated" ? `chat ${frame.chat_id}` : `message ${frame.message.id}`;
}

/** Records `frame` as sent. */
function remember(sent: SentFrames, frame: VisitorFrame, data: string): void {
  if (frame.type === "message.created") sent.ids.add(frame.message.id);
  else sent.last.set(frameKey(frame), data);
}

/**
 * Whether `frame` would tell the socket nothing new: a message it has, or the very frame it got
 * last about the same conversation or message (an edit back to an earlier text still goes out).
 */
function isRepeat(sent: SentFrames, frame: VisitorFrame, data: string): boolean {
  return frame.type === "message.created"
    ? sent.ids.has(frame.message.id)
    : sent.last.get(frameKey(frame)) === data;
}

/** Creates a hub; nothing is read until a notice or a replay arrives. */
export function createRealtimeHub(options: RealtimeHubOptions): RealtimeHub {
  const {
    sql,
    replayWindowMs = 30_000,
    openDeadlineMs = OPEN_DEADLINE_MS,
    onError = reportError,
  } = options;
  if (!Number.isFinite(replayWindowMs) || replayWindowMs < 0) {
    throw new RangeError("Cannot create the hub: replayWindowMs must be a non-negative number");
  }
  /** Sockets by application, then by client. */
  const sockets = new Map<number, Map<number, Set<WebSocket>>>();
  /** Frames kept for sockets still in their upgrade, sent in order once they open. */
  const opening = new Map<
    WebSocket,
    { frames: string[]; deadline: ReturnType<typeof setTimeout> }
  >();
  /**
   * Sockets catching up (see `attachVisitor`), or caught up lately: while `holding`, the frames
   * pushed to them wait in `held` behind the catch-up; then, for a while, a pushed frame that the
   * catch-up sent already (a message by id, any other frame as it is) is not sent again.
   */
  const catchUps = new Map<WebSocket, CatchUpState>();
  /** Catch-ups waiting for the hub's turn (see `catchUp`). */
  let waitingCatchUps: {
    socket: WebSocket;
    who: Visitor;
    since: Date;
    caught: CatchUpState;
    forget: () => void;
  }[] = [];
  /** Pushed message ids, oldest first (a Set iterates in insertion order). */
  const pushed = new Set<number>();
  let socketCount = 0;
  // Until a notice arrives, the hub's creation is the latest moment known to be covered.
  let lastNoticeAt = Date.now();
  let queue: Promise<void> = Promise.resolve();
  let stopped = false;
  /** Notices waiting for the hub's turn, in arrival order, and that turn. */
  let waiting: ChangeNotice[] = [];
  let waitingTurn: Promise<void> = Promise.resolve();

  function serialize(work: () => Promise<void>): Promise<void> {
    queue = queue.then(async () => {
      if (stopped) return;
      try {
        await work();
      } catch (error) {
        onError(error);
      }
    });
    return queue;
  }

  /**
   * Pushes every notice that waited for this turn. Under load notices arrive faster than their
   * reads finish; consecutive ones that only created messages are read together (one query for
   * their joined id range, in id order), which keeps the hub from falling behind. A notice that
   * changed a conversation or edited a message is pushed on its own, in its place.
   */
  async function pushWaiting(): Promise<void> {
    const notices = waiting;
    waiting = [];
    for (const notice of joinMessageRuns(notices)) {
      try {
        await withRetries(() => pushNotice(notice));
      } catch (error) {
        onError(error);
      }
    }
  }

  /**
   * Runs a notice's reads again when they fail (a connection PostgreSQL ended, say): the messages
   * it announces are committed and acknowledged, and no later notice would push them. Notices
   * wait meanwhile, so frames keep their order. Pushing twice is harmless: a message pushed is
   * remembered.
   */
  async function withRetries<T>(work: () => Promise<T>): Promise<T> {
    for (let attempt = 1;; attempt++) {
      try {
        return await work();
      } catch (error) {
        if (attempt > PUSH_RETRY_DELAYS_MS.length || stopped) throw error;
        await new Promise((resolve) => setTimeout(resolve, PUSH_RETRY_DELAYS_MS[attempt - 1]));
      }
    }
  }

  function detach(socket: WebSocket, who: Visitor): void {
    const clients = sockets.get(who.appId);
    const set = clients?.get(who.clientId);
    if (!clients || !set?.delete(socket)) return;
    socketCount -= 1;
    if (set.size === 0) clients.delete(who.clientId);
    if (clients.size === 0) sockets.delete(who.appId);
  }

  function watchedClients(appIds: Iterable<number>): WatchedClient[] {
    const clients: WatchedClient[] = [];
    for (const appId of new Set(appIds)) {
      for (const clientId of sockets.get(appId)?.keys() ?? []) clients.push({ appId, clientId });
    }
    return clients;
  }

  function push(appId: number, clientId: number, frame: VisitorFrame): void {
    const targets = sockets.get(appId)?.get(clientId);
    if (!targets || stopped) return;
    const data = JSON.stringify(frame);
    for (const socket of targets) {
      const caught = catchUps.get(socket);
      if (!caught) {
        sendFrame(socket, data);
      } else if (caught.holding) {
        caught.held.push({ frame, data });
      } else if (!isRepeat(caught.sent, frame, data)) {
        remember(caught.sent, frame, data);
        sendFrame(socket, data);
      }
    }
  }

  /**
   * Sends `socket` what `who` got from `since` on — its conversations' state, messages and edits,
   * as a replay reads them — then what was pushed to it meanwhile and the snapshot does not cover,
   * each frame once. The frames pushed meanwhile were read before the snapshot, so where it has the
   * same conversation or message they are older and are left out (sent after it, a state frame
   * would have put a closed conversation back to open). A socket attached late (its token looked
   * up after its upgrade) misses nothing; should the read fail, it is closed (1011), and its
   * client reconnects and reads the history. Catch-ups waiting together share one read, from the
   * earliest of their times: a socket may get a little more than it asked for, never less.
   */
  function catchUp(socket: WebSocket, who: Visitor, since: Date): void {
    const caught: CatchUpState = {
      holding: true,
      held: [],
      sent: { ids: new Set(), last: new Map() },
    };
    catchUps.set(socket, caught);
    const forget = () => catchUps.get(socket) === caught && catchUps.delete(socket);
    socket.addEventListener("close", forget, { once: true });
    // The catch-ups waiting for the hub's turn share one read: after a restart every visitor's
    // socket reconnects at once, and a read each would hold the notices up behind them.
    waitingCatchUps.push({ socket, who, since, caught, forget });
    if (waitingCatchUps.length === 1) void serialize(runCatchUps);
  }

  /** Runs the catch-ups that waited for this turn, with one read from the earliest `since`. */
  async function runCatchUps(): Promise<void> {
    const batch = waitingCatchUps;
    waitingCatchUps = [];
    if (batch.length === 0) return;
    const since = new Date(Math.min(...batch.map((entry) => entry.since.getTime())));
    const clients = new Map(batch.map(({ who }) => [`${who.appId} ${who.clientId}`, who]));
    let frames: ReturnType<typeof framesOf>;
    try {
      frames = framesOf(
        await withRetries(() => listClientChangesSince(sql, [...clients.values()], since)),
      );
    } catch (error) {
      for (const { socket, forget } of batch) {
        forget();
        closeSocket(socket, INTERNAL_ERROR_CLOSE, "Internal server error");
      }
      throw error;
    }
    for (const { socket, who, caught, forget } of batch) {
      const covered: SentFrames = { ids: new Set(), last: new Map() };
      for (const { appId, clientId, frame } of frames) {
        if (appId !== who.appId || clientId !== who.clientId) continue;
        const data = JSON.stringify(frame);
        remember(covered, frame, data);
        remember(caught.sent, frame, data);
        sendFrame(socket, data);
      }
      for (const { frame, data } of caught.held) {
        const isCovered = frame.type === "message.created"
          ? covered.ids.has(frame.message.id)
          : covered.last.has(frameKey(frame));
        if (isCovered) continue;
        remember(caught.sent, frame, data);
        sendFrame(socket, data);
      }
      caught.holding = false;
      caught.held = [];
      // A frame the snapshot read may still come from its notice, pushed after it.
      const timer = setTimeout(forget, REPEAT_WINDOW_MS);
      Deno.unrefTimer(timer);
    }
  }

  /**
   * Sends without ever throwing: a socket still in its upgrade keeps the frame until it opens;
   * one that has more than {@linkcode MAX_UNREAD_BYTES} unread is closed instead; a socket that is
   * closing simply misses the frame.
   */
  function sendFrame(socket: WebSocket, data: string): void {
    const upgrade = opening.get(socket);
    if (upgrade) {
      upgrade.frames.push(data);
      return;
    }
    if (socket.readyState !== WebSocket.OPEN) return;
    if (socket.bufferedAmount > MAX_UNREAD_BYTES) {
      closeSocket(socket, POLICY_VIOLATION, "Frames are not being read");
      return;
    }
    try {
      socket.send(data);
    } catch {
      // It closed between the check and the send; its close event detaches it.
    }
  }

  async function pushNotice(notice: ChangeNotice): Promise<void> {
    // Sockets may have closed while the notice waited its turn: look again.
    const chats = distinctPairs((notice.c ?? []).filter(([appId]) => sockets.has(appId)));
    const apps = notice.a.filter((appId) => sockets.has(appId));
    const edits = (notice.e ?? []).filter(([appId]) => sockets.has(appId));
    const [conversations, messages, edited] = await Promise.all([
      listConversationsByIds(sql, chats),
      notice.m ? listMessagesInRange(sql, apps, notice.m) : [],
      listMessagesByIds(sql, edits),
    ]);
    pushChanges({ conversations, messages, edited });
  }

  /** Pushes `changes` ({@linkcode framesOf}); a message goes out once, to its visitor's sockets. */
  function pushChanges(changes: ClientChanges): void {
    for (const { appId, clientId, frame } of framesOf(changes)) {
      if (frame.type === "message.created") {
        const id = frame.message.id;
        // Only a message pushed to a socket counts as pushed: a replay may still owe it to one.
        if (pushed.has(id) || !sockets.get(appId)?.has(clientId)) continue;
        pushed.add(id);
        if (pushed.size > REMEMBERED_MESSAGES) pushed.delete(pushed.values().next().value!);
      }
      push(appId, clientId, frame);
    }
  }

  return {
    attachVisitor(socket, who, options = {}) {
      if (!Number.isSafeInteger(who.appId) || !Number.isSafeInteger(who.clientId)) {
        throw new TypeError("Cannot attach a socket: appId and clientId must be integers");
      }
      if (stopped) throw new Error("Cannot attach a socket: the hub is stopped");
      if (socket.readyState === WebSocket.CLOSING || socket.readyState === WebSocket.CLOSED) return;
      let clients = sockets.get(who.appId);
      if (!clients) sockets.set(who.appId, clients = new Map());
      let set = clients.get(who.clientId);
      if (!set) clients.set(who.clientId, set = new Set());
      if (set.has(socket)) return;
      if (set.size >= MAX_SOCKETS_PER_VISITOR) {
        const oldest = set.values().next().value!;
        detach(oldest, who);
        closeSocket(oldest, POLICY_VIOLATION, "Too many sockets for this visitor");
      }
      set.add(socket);
      socketCount += 1;
      socket.addEventListener("close", () => detach(socket, who), { once: true });
      if (socket.readyState === WebSocket.CONNECTING) {
        const upgrade = {
          frames: [] as string[],
          deadline: setTimeout(() => {
            opening.delete(socket);
            detach(socket, who);
          }, openDeadlineMs),
        };
        opening.set(socket, upgrade);
        socket.addEventListener("open", () => {
          clearTimeout(upgrade.deadline);
          if (opening.get(socket) !== upgrade) return;
          opening.delete(socket);
          for (const data of upgrade.frames) sendFrame(socket, data);
        }, { once: true });
        socket.addEventListener("close", () => {
          clearTimeout(upgrade.deadline);
          opening.delete(socket);
        }, { once: true });
      }
      if (options.since) catchUp(socket, who, options.since);
    },

    handleNotice(payload) {
      if (stopped) return Promise.resolve();
      const notice = decodeChangeNotice(payload);
      if (!notice || !isRange(notice.m) || !isEdits(notice.e)) {
        onError(new TypeError(`Cannot handle the notice: it is not a change notice: ${payload}`));
        return Promise.resolve();
      }
      lastNoticeAt = Date.now();
      if (!notice.a.some((appId) => sockets.has(appId))) return Promise.resolve();
      waiting.push(notice);
      // The first notice to wait schedules a turn; the others join it.
      if (waiting.length === 1) waitingTurn = serialize(pushWaiting);
      return waitingTurn;
    },

    replay() {
      if (stopped || socketCount === 0) return Promise.resolve();
      // Taken now, not when the replay's turn comes: notices received after the reconnect
      // move lastNoticeAt past the outage.
      const since = new Date(lastNoticeAt - replayWindowMs);
      return serialize(async () => {
        const clients = watchedClients(sockets.keys());
        pushChanges(await listClientChangesSince(sql, clients, since));
      });
    },

    get socketCount() {
      return socketCount;
    },

    stop() {
      if (stopped) return;
      stopped = true;
      for (const clients of sockets.values()) {
        for (const set of clients.values()) {
          for (const socket of set) closeSocket(socket);
        }
      }
      sockets.clear();
      for (const { deadline } of opening.values()) clearTimeout(deadline);
      opening.clear();
      socketCount = 0;
    },
  };
}

/**
 * The frames of `changes`, each with the visitor it is for: an open conversation's state before
 * the new messages (a new or reopened conversation comes before the messages in it), a closed
 * one's after them (a farewell or the click that closed it comes before the close), then edits.
 */
function framesOf(
  changes: ClientChanges,
): { appId: number; clientId: number; frame: VisitorFrame }[] {
  const state = ({ appId, chat }: ClientChanges["conversations"][number]) => ({
    appId,
    clientId: chat.client_id,
    frame: { type: "chat.updated", chat_id: chat.id, message: chat, chat } as VisitorFrame,
  });
  return [
    ...changes.conversations.filter(({ chat }) => chat.status === "open").map(state),
    ...changes.messages.map(({ appId, clientId, message }) => ({
      appId,
      clientId,
      frame: { type: "message.created", chat_id: message.chat_id, message } as VisitorFrame,
    })),
    ...changes.conversations.filter(({ chat }) => chat.status !== "open").map(state),
    ...changes.edited.map(({ appId, clientId, message, deleted }) => ({
      appId,
      clientId,
      frame: (deleted
        ? {
          type: "message.deleted",
          chat_id: message.chat_id,
          message: { id: message.id, chat_id: message.chat_id },
        }
        : { type: "message.updated", chat_id: message.chat_id, message }) as VisitorFrame,
    })),
  ];
}

/**
 * `notices` with each run of consecutive ones that only created messages joined into one: their
 * applications together, their id ranges spanned (a range may hold other transactions' ids
 * anyway; a message is pushed once).
 */
function joinMessageRuns(notices: ChangeNotice[]): ChangeNotice[] {
  const joined: ChangeNotice[] = [];
  let run: { a: Set<number>; m: [number, number] } | null = null;
  for (const notice of notices) {
    if (notice.m && !notice.c?.length && !notice.e?.length) {
      if (run) {
        for (const appId of notice.a) run.a.add(appId);
        run.m = [Math.min(run.m[0], notice.m[0]), Math.max(run.m[1], notice.m[1])];
      } else {
        run = { a: new Set(notice.a), m: [notice.m[0], notice.m[1]] };
      }
      continue;
    }
    if (run) joined.push({ a: [...run.a], m: run.m });
    run = null;
    joined.push(notice);
  }
  if (run) joined.push({ a: [...run.a], m: run.m });
  return joined;
}

/**
 * Closes `socket` with `code` and `reason` — once it opens, when its upgrade is still going on
 * (Deno cannot close a socket before) — and never throws.
 */
export function closeSocket(
  socket: WebSocket,
  code = GOING_AWAY,
  reason = "Server is shutting down",
): void {
  if (socket.readyState === WebSocket.CONNECTING) {
    socket.addEventListener("open", () => closeSocket(socket, code, reason), { once: true });
    return;
  }
  try {
    socket.close(code, reason);
  } catch {
    // Already closing: nothing more to do.
  }
}

function isRange(range: ChangeNotice["m"]): boolean {
  return range === undefined ||
    (Array.isArray(range) && range.length === 2 && range.every(Number.isSafeInteger));
}

function isEdits(edits: ChangeNotice["e"]): boolean {
  return edits === undefined ||
    (Array.isArray(edits) &&
      edits.every((edit) =>
        Array.isArray(edit) && edit.length === 4 && edit.every(Number.isSafeInteger)
      ));
}

function distinctPairs(pairs: [number, number][]): [number, number][] {
  const seen = new Map(pairs.map((pair) => [pair.join(":"), pair]));
  return [...seen.values()];
}

function reportError(error: unknown): void {
  log("error", "Realtime hub failed to push a change", describeError(error));
}
