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
} from "../db/realtime.ts";
import { type ChangeNotice, decodeChangeNotice, joinMessageRuns } from "../domain/change_notice.ts";
import { describeError, log } from "../log.ts";
import { closeSocket, INTERNAL_ERROR_CLOSE } from "./socket_close.ts";
import {
  frameKey,
  framesOf,
  isRepeat,
  remember,
  type SentFrames,
  type VisitorFrame,
} from "./visitor_frames.ts";
import { createVisitorSockets, type Visitor } from "./visitor_sockets.ts";

export type { VisitorFrame } from "./visitor_frames.ts";
export type { Visitor } from "./visitor_sockets.ts";

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

/**
 * How long a socket may stay in its upgrade by default: Deno never opens nor closes one whose
 * client left during the upgrade, so the hub forgets it (and the frames it kept for it).
 */
const OPEN_DEADLINE_MS = 10_000;

/** How long a socket's catch-up keeps what it sent, so that its notices do not send it again. */
const REPEAT_WINDOW_MS = 10_000;

/** A socket's catch-up (see `catchUp` in the hub). */
interface CatchUpState {
  holding: boolean;
  held: { frame: VisitorFrame; data: string; openedBy?: number }[];
  sent: SentFrames;
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
  const sockets = createVisitorSockets(openDeadlineMs);

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

  /**
   * Sends `frame` to the visitor's sockets; one announcing a conversation's opening
   * (`openedBy`: the message that opened it) not to a socket that was sent that message already.
   */
  function push(appId: number, clientId: number, frame: VisitorFrame, openedBy?: number): void {
    const targets = sockets.of(appId, clientId);
    if (!targets || stopped) return;
    const data = JSON.stringify(frame);
    for (const socket of targets) {
      const caught = catchUps.get(socket);
      if (!caught) {
        sockets.send(socket, data);
      } else if (caught.holding) {
        caught.held.push({ frame, data, openedBy });
      } else if (openedBy !== undefined && caught.sent.ids.has(openedBy)) {
        continue;
      } else if (!isRepeat(caught.sent, frame, data)) {
        remember(caught.sent, frame, data);
        sockets.send(socket, data);
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
        sockets.send(socket, data);
      }
      for (const { frame, data, openedBy } of caught.held) {
        const isCovered = frame.type === "message.created"
          ? covered.ids.has(frame.message.id)
          : covered.last.has(frameKey(frame)) ||
            (openedBy !== undefined && covered.ids.has(openedBy));
        if (isCovered) continue;
        remember(caught.sent, frame, data);
        sockets.send(socket, data);
      }
      caught.holding = false;
      caught.held = [];
      // A frame the snapshot read may still come from its notice, pushed after it.
      const timer = setTimeout(forget, REPEAT_WINDOW_MS);
      Deno.unrefTimer(timer);
    }
  }

  async function pushNotice(notice: ChangeNotice): Promise<void> {
    // Sockets may have closed while the notice waited its turn: look again.
    const chats = distinctPairs((notice.c ?? []).filter(([appId]) => sockets.hasApp(appId)));
    const apps = notice.a.filter((appId) => sockets.hasApp(appId));
    const edits = (notice.e ?? []).filter(([appId]) => sockets.hasApp(appId));
    const [conversations, messages, edited] = await Promise.all([
      listConversationsByIds(sql, chats),
      notice.m ? listMessagesInRange(sql, apps, notice.m) : [],
      listMessagesByIds(sql, edits),
    ]);
    pushChanges({ conversations, messages, edited });
  }

  /** Pushes `changes` ({@linkcode framesOf}); a message goes out once, to its visitor's sockets. */
  function pushChanges(changes: ClientChanges): void {
    for (const { appId, clientId, frame, openedBy } of framesOf(changes)) {
      // A conversation's opening, when the message that opened it went out before, is old news.
      if (openedBy !== undefined && pushed.has(openedBy)) continue;
      if (frame.type === "message.created") {
        const id = frame.message.id;
        // Only a message pushed to a socket counts as pushed: a replay may still owe it to one.
        if (pushed.has(id) || !sockets.of(appId, clientId)) continue;
        pushed.add(id);
        if (pushed.size > REMEMBERED_MESSAGES) pushed.delete(pushed.values().next().value!);
      }
      push(appId, clientId, frame, openedBy);
    }
  }

  return {
    attachVisitor(socket, who, options = {}) {
      if (!Number.isSafeInteger(who.appId) || !Number.isSafeInteger(who.clientId)) {
        throw new TypeError("Cannot attach a socket: appId and clientId must be integers");
      }
      if (stopped) throw new Error("Cannot attach a socket: the hub is stopped");
      if (sockets.attach(socket, who) && options.since) catchUp(socket, who, options.since);
    },

    handleNotice(payload) {
      if (stopped) return Promise.resolve();
      const notice = decodeChangeNotice(payload);
      if (!notice) {
        onError(new TypeError(`Cannot handle the notice: it is not a change notice: ${payload}`));
        return Promise.resolve();
      }
      lastNoticeAt = Date.now();
      if (!notice.a.some((appId) => sockets.hasApp(appId))) return Promise.resolve();
      waiting.push(notice);
      // The first notice to wait schedules a turn; the others join it.
      if (waiting.length === 1) waitingTurn = serialize(pushWaiting);
      return waitingTurn;
    },

    replay() {
      if (stopped || sockets.count === 0) return Promise.resolve();
      // Taken now, not when the replay's turn comes: notices received after the reconnect
      // move lastNoticeAt past the outage.
      const since = new Date(lastNoticeAt - replayWindowMs);
      return serialize(async () => {
        const clients = sockets.watchedClients(sockets.apps());
        let changes: ClientChanges;
        try {
          changes = await withRetries(() => listClientChangesSince(sql, clients, since));
        } catch (error) {
          // What the outage held is committed and no notice will bring it: the sockets that may
          // have missed it are closed (1011), and their clients reconnect and read it.
          for (const { appId, clientId } of clients) {
            for (const socket of sockets.of(appId, clientId) ?? []) {
              closeSocket(socket, INTERNAL_ERROR_CLOSE, "Internal server error");
            }
          }
          throw error;
        }
        pushChanges(changes);
      });
    },

    get socketCount() {
      return sockets.count;
    },

    stop() {
      if (stopped) return;
      stopped = true;
      sockets.closeAll();
    },
  };
}

function distinctPairs(pairs: [number, number][]): [number, number][] {
  const seen = new Map(pairs.map((pair) => [pair.join(":"), pair]));
  return [...seen.values()];
}

function reportError(error: unknown): void {
  log("error", "Realtime hub failed to push a change", describeError(error));
}
