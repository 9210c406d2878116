import assert from "node:assert/strict";
import { SlackCallError, type SlackWebClient } from "./web_client.ts";
import type { ClaimedMirror } from "../../db/slack_sends.ts";
import {
  cutAnswerTs,
  type MirrorDeps,
  ROOT_EVENT_TYPE,
  rootMessage,
  sendMirror,
} from "./mirror.ts";

/** Deps whose Slack client records the posts and whose records are kept. */
function recordingDeps() {
  const posts: Record<string, unknown>[] = [];
  const saved: number[] = [];
  const outcomes: string[] = [];
  const client = {
    chat: {
      postMessage: (args: Record<string, unknown>) => {
        posts.push(args);
        return Promise.resolve({ ok: true, ts: `1800000000.00000${posts.length}` });
      },
      update: () => Promise.resolve({ ok: true }),
    },
  } as unknown as SlackWebClient;
  const deps: MirrorDeps = {
    clientFor: () => client,
    saveThread: () => Promise.resolve(),
    noteRootAttempt: () => Promise.resolve(),
    forgetRootAttempt: () => Promise.resolve(),
    noteRootSearched: () => Promise.resolve(),
    saveMirrored: (link) => (saved.push(link.parts), Promise.resolve()),
    record: (_send, outcome) => (outcomes.push(outcome.state), Promise.resolve()),
    pauseWorkspace: () => Promise.resolve(),
  };
  return { deps, posts, saved, outcomes };
}

function claimed(message: Partial<NonNullable<ClaimedMirror["message"]>>): ClaimedMirror {
  return {
    appId: 1,
    id: 7,
    topic: "message",
    attempts: 0,
    claimedAt: "2026-11-25T00:00:00.000000Z",
    turn: 1,
    conversation: {
      id: 3,
      status: "open",
      channel: "whatsapp",
      visitorName: "Ana",
      visitorEmail: null,
    },
    message: {
      id: 9,
      senderType: "bot",
      senderName: null,
      messageType: "text",
      content: "Your order shipped",
      payload: null,
      internal: false,
      failure: null,
      postedParts: 0,
      firstTs: null,
      replyTo: null,
      referral: null,
      ...message,
    },
    thread: { channelId: "C1", ts: "1700000000.000001" },
    rootAttempt: null,
    installation: {
      teamId: "T1",
      channelId: "C1",
      botId: "B1",
      botUserId: "U1",
      botTokenSealed: "sealed",
      rateLimitedForMs: 0,
    },
  };
}

Deno.test("sendMirror posts a failed message followed by its Not delivered line", async () => {
  const { deps, posts, saved, outcomes } = recordingDeps();
  await sendMirror(deps, claimed({ failure: "Re-engagement message" }));
  assert.deepEqual(posts.map((post) => post.text), [
    "Your order shipped",
    ":warning: Not delivered: Re-engagement message",
  ]);
  assert.deepEqual(saved, [1, 2]);
  assert.deepEqual(outcomes, ["succeeded"]);
});

Deno.test("sendMirror adds only the Not delivered line to a message already in the thread", async () => {
  const { deps, posts, saved } = recordingDeps();
  await sendMirror(
    deps,
    claimed({ failure: "Message undeliverable", postedParts: 1, firstTs: "1800000000.000009" }),
  );
  assert.deepEqual(posts.map((post) => [post.thread_ts, post.text]), [
    ["1700000000.000001", ":warning: Not delivered: Message undeliverable"],
  ]);
  assert.deepEqual(saved, [2]);
  // Once there, another claim of the same message posts nothing more.
  const again = recordingDeps();
  await sendMirror(
    again.deps,
    claimed({ failure: "Message undeliverable", postedParts: 2, firstTs: "1800000000.000009" }),
  );
  assert.deepEqual(again.posts, []);
});

Deno.test("sendMirror opens a customer's reply with the message it quotes, or that it was deleted", async () => {
  const { deps, posts, saved } = recordingDeps();
  const quoted = {
    deleted: false as const,
    senderType: "bot",
    senderName: null,
    messageType: "text" as const,
    content: "Shall we ship it?",
    payload: null,
  };
  const reply = { senderType: "visitor", content: "yes" };
  await sendMirror(deps, claimed({ ...reply, replyTo: quoted }));
  await sendMirror(deps, claimed({ ...reply, replyTo: { deleted: true } }));
  assert.deepEqual(posts.map((post) => post.text), [
    "↩ Replying to Bot: “Shall we ship it?”\nyes",
    "↩ Replying to a deleted message\nyes",
  ]);
  assert.deepEqual(
    (posts[0].blocks as { type: string }[]).map((block) => block.type),
    ["context", "section"],
  );
  assert.deepEqual(saved, [1, 1]);
});

Deno.test("sendMirror shows where a web visitor's file leads beside its name; a WhatsApp customer's keeps its name as the link", async () => {
  const payload = {
    url: "https://evil.example/login",
    filename: "https://bank.example/invoice.pdf",
  };
  const file = { senderType: "visitor", messageType: "file", content: "", payload } as const;
  const web = recordingDeps();
  const fromWeb = claimed(file);
  await sendMirror(web.deps, {
    ...fromWeb,
    conversation: { ...fromWeb.conversation!, channel: "web" },
  });
  assert.deepEqual(web.posts.map((post) => post.text), [
    "https://bank.example/invoice.pdf (<https://evil.example/login>)",
  ]);
  // A WhatsApp customer's file is at Parley's own media link, whatever its name says.
  const proxied = { ...payload, url: "https://parley.example/api/v1/whatsapp/media/M1?sig=a" };
  const whatsapp = recordingDeps();
  await sendMirror(whatsapp.deps, claimed({ ...file, payload: proxied }));
  assert.deepEqual(whatsapp.posts.map((post) => post.text), [
    `<${proxied.url.replaceAll("&", "&amp;")}|https://bank.example/invoice.pdf>`,
  ]);
});

Deno.test("sendMirror takes a post whose 200 answer was cut as made, and posts it once", async () => {
  const { deps, posts, outcomes } = recordingDeps();
  const cut = new SlackCallError("chat.postMessage", {
    code: "request_error",
    retryAfterMs: null,
  }, { answered: true });
  const client = deps.clientFor("sealed");
  client.chat.postMessage = (args) => {
    posts.push(args as unknown as Record<string, unknown>);
    return Promise.reject(cut);
  };
  await sendMirror(deps, claimed({}));
  assert.equal(posts.length, 1);
  assert.deepEqual(outcomes, ["succeeded"]);

  // Cut before Slack answered (nothing says it acted): tried again later.
  const unanswered = recordingDeps();
  unanswered.deps.clientFor("sealed").chat.postMessage = () =>
    Promise.reject(
      new SlackCallError("chat.postMessage", { code: "request_error", retryAfterMs: null }),
    );
  await sendMirror(unanswered.deps, claimed({}));
  assert.deepEqual(unanswered.outcomes, ["pending"]);
});

Deno.test("sendMirror counts a first part whose answer was cut, so that a retry goes on after it", async () => {
  const { deps, posts, outcomes } = recordingDeps();
  const links: { ts: string; parts: number }[] = [];
  deps.saveMirrored = (link) => (links.push({ ts: link.ts, parts: link.parts }), Promise.resolve());
  const client = deps.clientFor("sealed");
  client.chat.postMessage = (args) => {
    posts.push(args as unknown as Record<string, unknown>);
    return Promise.reject(
      posts.length === 1
        ? new SlackCallError("chat.postMessage", { code: "request_error", retryAfterMs: null }, {
          answered: true,
        })
        : new SlackCallError("chat.postMessage", { code: "http_error", retryAfterMs: null }),
    );
  };
  // Two parts: the message, then its Not delivered line, which Slack fails.
  await sendMirror(deps, claimed({ failure: "Message undeliverable" }));
  assert.equal(posts.length, 2);
  assert.deepEqual(links, [{ ts: cutAnswerTs(9), parts: 1 }], "the cut part is counted");
  assert.deepEqual(outcomes, ["pending"]);
  assert.doesNotMatch(cutAnswerTs(9), /^\d+\.\d+$/, "never a ts of Slack's");
});

Deno.test("sendMirror retries a post refused not_in_channel while joining cannot be done now, and gives up when it is refused", async () => {
  for (
    const [joinError, expected] of [
      [{ code: "ratelimited", retryAfterMs: 30_000 }, "pending"],
      [{ code: "http_error", retryAfterMs: null }, "pending"],
      [{ code: "method_not_supported_for_channel_type", retryAfterMs: null }, "failed"],
      [{ code: "too_many_members", retryAfterMs: null }, "failed"],
      [null, "pending"],
    ] as const
  ) {
    const { deps, outcomes } = recordingDeps();
    const delays: number[] = [];
    let uncounted = false;
    deps.record = (_send, outcome) => {
      outcomes.push(outcome.state);
      if (outcome.state === "pending") {
        delays.push(outcome.retryInMs);
        uncounted = outcome.uncounted === true;
      }
      return Promise.resolve();
    };
    const client = deps.clientFor("sealed");
    client.chat.postMessage = () =>
      Promise.reject(
        new SlackCallError("chat.postMessage", { code: "not_in_channel", retryAfterMs: null }),
      );
    client.conversations = {
      join: () =>
        joinError === null
          ? Promise.resolve({ ok: true })
          : Promise.reject(new SlackCallError("conversations.join", joinError)),
    } as unknown as SlackWebClient["conversations"];
    await sendMirror(deps, claimed({}));
    assert.deepEqual(outcomes, [expected], JSON.stringify(joinError));
    if (joinError?.code === "ratelimited") {
      assert.ok(delays[0] >= 30_000, "Retry-After honoured");
      assert.equal(uncounted, true, "Slack's rate limit uses no attempt");
    }
    if (joinError === null) assert.deepEqual(delays, [1_000], "joined: tried again at once");
  }
});

type RootAttempt = NonNullable<ClaimedMirror["rootAttempt"]>;

/** A conversation's first send: no thread yet, its root attempted before when `rootAttempt`. */
function firstSend(attempts: number, rootAttempt: RootAttempt | null): ClaimedMirror {
  return { ...claimed({}), attempts, rootAttempt, thread: null };
}

/** A root attempted at these Unix seconds, not searched for yet. */
const attemptedAt = (firstAt: number, lastAt = firstAt): RootAttempt => ({
  firstAt,
  lastAt,
  searchedTo: null,
});

/**
 * Deps whose channel history answers `pages` in turn (newest first; `has_more` while pages
 * remain) and whose root post is cut (`cut`) or answered.
 */
function rootDeps(pages: Record<string, unknown>[][], options: { cut: boolean }) {
  const recording = recordingDeps();
  const threads: string[] = [];
  const noted: string[] = [];
  const searches: Record<string, unknown>[] = [];
  const searchedTo: string[] = [];
  const updates: Record<string, unknown>[] = [];
  const paused: number[] = [];
  const errors: (string | null)[] = [];
  const retries: { retryInMs: number; uncounted: boolean }[] = [];
  const client = recording.deps.clientFor("sealed");
  const post = client.chat.postMessage;
  client.chat.postMessage = (args) => {
    if (args.thread_ts !== undefined || !options.cut) return post(args);
    recording.posts.push(args as unknown as Record<string, unknown>);
    return Promise.reject(
      new SlackCallError("chat.postMessage", { code: "request_error", retryAfterMs: null }, {
        answered: true,
      }),
    );
  };
  client.chat.update = (
    args,
  ) => (updates.push(args as unknown as Record<string, unknown>), Promise.resolve({ ok: true }));
  client.conversations = {
    history: (args: Record<string, unknown>) => {
      searches.push(args);
      const page = searches.length - 1;
      return Promise.resolve({
        ok: true,
        messages: pages[page] ?? [],
        has_more: page + 1 < pages.length,
      });
    },
  } as unknown as SlackWebClient["conversations"];
  recording.deps.saveThread = (thread) => (threads.push(thread.ts), Promise.resolve());
  recording.deps.noteRootAttempt = () => (noted.push("noted"), Promise.resolve());
  recording.deps.forgetRootAttempt = () => (noted.push("forgotten"), Promise.resolve());
  recording.deps.noteRootSearched = (_root, ts) => (searchedTo.push(ts), Promise.resolve());
  recording.deps.pauseWorkspace = (_team, waitMs) => (paused.push(waitMs), Promise.resolve());
  recording.deps.record = (_send, outcome, error) => {
    recording.outcomes.push(outcome.state);
    errors.push(error);
    if (outcome.state === "pending") {
      retries.push({ retryInMs: outcome.retryInMs, uncounted: outcome.uncounted ?? false });
    }
    return Promise.resolve();
  };
  return {
    ...recording,
    client,
    threads,
    noted,
    searches,
    searchedTo,
    updates,
    paused,
    errors,
    retries,
  };
}

const ourRoot = {
  type: "message",
  ts: "1800000001.000200",
  bot_id: "B1",
  user: "U1",
  metadata: { event_type: ROOT_EVENT_TYPE, event_payload: { app_id: 1, chat_id: 3 } },
};

/** `ourRoot` with other fields; `payload` its metadata's. */
const like = (fields: Record<string, unknown>, payload?: Record<string, unknown>) => ({
  ...ourRoot,
  ...fields,
  ...(payload ? { metadata: { event_type: ROOT_EVENT_TYPE, event_payload: payload } } : {}),
});

/** Fifteen posts of others, newest first, from `ts` down. */
const chatter = (ts: number) =>
  Array.from({ length: 15 }, (_, i) => ({ type: "message", ts: `${ts - i}.000100`, text: "hi" }));

Deno.test("sendMirror finds a root whose answer was cut by its metadata, and opens no second thread", async () => {
  const { deps, posts, threads, searches, outcomes, noted, updates } = rootDeps([[
    like({ ts: "1800000001.000400" }, { app_id: 2, chat_id: 3 }),
    like({ ts: "1800000001.000300" }, { app_id: 1, chat_id: 4 }),
    like({ ts: "1800000001.000280", bot_id: "B9" }),
    { type: "message", ts: "1800000001.000250", text: "chatter" },
    // Slack may hand the payload's numbers back as text.
    like({}, { app_id: "1", chat_id: "3" }),
  ]], { cut: true });
  const before = Date.now() / 1000;
  await sendMirror(deps, firstSend(0, null));
  const after = Date.now() / 1000;
  assert.deepEqual(noted, ["noted"], "noted before it was posted");
  assert.deepEqual(threads, [ourRoot.ts]);
  assert.deepEqual(posts.map((post) => post.thread_ts ?? "root"), ["root", ourRoot.ts]);
  assert.deepEqual(posts[0].metadata, ourRoot.metadata);
  assert.equal(searches.length, 1);
  const { oldest, latest, inclusive, limit, include_all_metadata } = searches[0];
  // A minute before the attempt, to 70 s after it (the attempt was made between before and after).
  assert.ok(Number(oldest) >= before - 60.001 && Number(oldest) <= after - 60, String(oldest));
  assert.ok(Number(latest) >= before + 69.999 && Number(latest) <= after + 70, String(latest));
  assert.deepEqual([inclusive, limit, include_all_metadata], [true, 15, true]);
  // The root found shows the conversation as it is now.
  assert.deepEqual(updates.map((update) => [update.ts, update.text]), [
    [ourRoot.ts, "Ana · whatsapp · open"],
  ]);
  assert.deepEqual(outcomes, ["succeeded"]);
});

Deno.test("sendMirror looks for a root attempted before on the next send, page by page, before it posts one", async () => {
  // Cut, and not listed yet: tried again later.
  const first = rootDeps([[]], { cut: true });
  await sendMirror(first.deps, firstSend(0, null));
  assert.deepEqual([first.threads, first.outcomes], [[], ["pending"]]);
  // Any later send of the conversation (a retry, or the next message's) finds it on page 2.
  const later = rootDeps([chatter(1_800_000_090), [ourRoot]], { cut: false });
  await sendMirror(later.deps, firstSend(0, attemptedAt(1_800_000_000.5, 1_800_000_030.5)));
  assert.deepEqual(later.threads, [ourRoot.ts]);
  assert.deepEqual(later.posts.map((post) => post.thread_ts ?? "root"), [ourRoot.ts]);
  assert.deepEqual(
    later.searches.map((search) => [search.oldest, search.latest, search.inclusive]),
    [
      ["1799999940.500000", "1800000100.500000", true],
      ["1799999940.500000", "1800000076.000100", false],
    ],
  );
  assert.deepEqual(later.searchedTo, ["1800000076.000100"], "how far back it read is noted");
  assert.deepEqual(later.noted, []);
  // Read to the end without it: posted, once.
  const lost = rootDeps([[]], { cut: false });
  await sendMirror(lost.deps, firstSend(2, attemptedAt(1_800_000_000)));
  assert.deepEqual(lost.posts.map((post) => post.thread_ts ?? "root"), [
    "root",
    "1800000000.000001",
  ]);
  assert.deepEqual(lost.noted, ["noted"]);
  assert.deepEqual(lost.updates, []);
});

Deno.test("sendMirror goes on with a long search where it stopped, without using attempts or posting", async () => {
  const pages = Array.from({ length: 6 }, (_, page) => chatter(1_800_000_090 - 15 * page));
  const { deps, posts, searches, searchedTo, outcomes, retries, errors } = rootDeps(pages, {
    cut: false,
  });
  await sendMirror(deps, firstSend(3, attemptedAt(1_800_000_000)));
  assert.equal(searches.length, 5);
  assert.deepEqual(posts, []);
  assert.deepEqual(outcomes, ["pending"]);
  assert.equal(retries[0].uncounted, true);
  assert.deepEqual(errors, ["Slack: incomplete (root search)"]);
  assert.equal(searchedTo.at(-1), "1800000016.000100");
  // The next claim reads on from there.
  const next = rootDeps([[ourRoot]], { cut: false });
  const resumed = { ...attemptedAt(1_800_000_000), searchedTo: "1800000016.000100" };
  await sendMirror(next.deps, firstSend(3, resumed));
  assert.deepEqual(next.searches.map((search) => [search.latest, search.inclusive]), [
    ["1800000016.000100", false],
  ]);
  assert.deepEqual(next.threads, [ourRoot.ts]);
});

Deno.test("sendMirror posts a conversation's first root without reading the channel's history", async () => {
  const { deps, posts, searches, threads, noted } = rootDeps([[ourRoot]], { cut: false });
  await sendMirror(deps, firstSend(0, null));
  assert.deepEqual(searches, []);
  assert.deepEqual(noted, ["noted"]);
  assert.deepEqual(threads, ["1800000000.000001"]);
  assert.equal(posts.length, 2);
});

Deno.test("sendMirror waits out a rate-limited search without holding the workspace; a refusal that lasts fails it", async () => {
  const limited = rootDeps([], { cut: false });
  limited.client.conversations.history = () =>
    Promise.reject(
      new SlackCallError("conversations.history", {
        code: "ratelimited",
        retryAfterMs: 60_000,
      }),
    );
  await sendMirror(limited.deps, firstSend(0, attemptedAt(1_800_000_000)));
  assert.deepEqual(limited.posts, [], "no second root");
  assert.deepEqual(limited.paused, []);
  assert.deepEqual(limited.outcomes, ["pending"]);
  assert.ok(limited.retries[0].retryInMs >= 60_000, String(limited.retries[0].retryInMs));
  assert.equal(limited.retries[0].uncounted, true);
  assert.deepEqual(limited.errors, ["Slack: ratelimited (root search)"]);

  const revoked = rootDeps([], { cut: false });
  revoked.client.conversations.history = () =>
    Promise.reject(
      new SlackCallError("conversations.history", {
        code: "token_revoked",
        retryAfterMs: null,
      }),
    );
  await sendMirror(revoked.deps, firstSend(0, attemptedAt(1_800_000_000)));
  assert.deepEqual(revoked.outcomes, ["failed"]);

  // Not a member any more (the bot was removed), it cannot read the channel: it joins again.
  const removed = rootDeps([], { cut: false });
  const joined: unknown[] = [];
  removed.client.conversations.history = () =>
    Promise.reject(
      new SlackCallError("conversations.history", { code: "not_in_channel", retryAfterMs: null }),
    );
  removed.client.conversations.join = (args) => (joined.push(args), Promise.resolve({ ok: true }));
  await sendMirror(removed.deps, firstSend(0, attemptedAt(1_800_000_000)));
  assert.equal(joined.length, 1);
  assert.deepEqual(removed.outcomes, ["pending"]);
  assert.deepEqual(removed.errors, ["Slack: not_in_channel (root search)"]);
});

Deno.test("sendMirror forgets a first root attempt Slack refused outright, and keeps one it may have made", async () => {
  for (
    const [error, expected] of [
      [new SlackCallError("chat.postMessage", { code: "ratelimited", retryAfterMs: 1_000 }), [
        "noted",
        "forgotten",
      ]],
      [new SlackCallError("chat.postMessage", { code: "channel_not_found", retryAfterMs: null }), [
        "noted",
        "forgotten",
      ]],
      [new SlackCallError("chat.postMessage", { code: "request_error", retryAfterMs: null }), [
        "noted",
      ]],
      [new SlackCallError("chat.postMessage", { code: "http_error", retryAfterMs: null }), [
        "noted",
      ]],
    ] as const
  ) {
    const { deps, client, noted } = rootDeps([], { cut: false });
    client.chat.postMessage = () => Promise.reject(error);
    await sendMirror(deps, firstSend(0, null));
    assert.deepEqual(noted, expected, error.info.code);
  }
});

Deno.test("sendMirror knows its bot's posts by user when Slack gave no bot id", async () => {
  const { deps, threads } = rootDeps([[
    like({ ts: "1800000001.000300", user: "U9", bot_id: undefined }),
    {
      ...ourRoot,
      bot_id: undefined,
    },
  ]], { cut: false });
  const send = firstSend(1, attemptedAt(1_800_000_000));
  await sendMirror(deps, { ...send, installation: { ...send.installation!, botId: null } });
  assert.deepEqual(threads, [ourRoot.ts]);
});

Deno.test("rootMessage() keeps a name's asterisks from ending its bold, and its escapes", () => {
  const { text, blocks } = rootMessage({
    id: 3,
    status: "open",
    channel: "web",
    visitorName: "Eve <!channel> *boss* joe_doe",
    visitorEmail: null,
  });
  assert.equal(
    (blocks[0] as { text: { text: string } }).text.text,
    "*Eve &lt;!channel&gt; \u2217boss\u2217 joe_doe* · web · conversation 3 · open",
  );
  assert.equal(text, "Eve &lt;!channel&gt; *boss* joe_doe · web · open");
});

Deno.test("sendMirror joins the channel again when the bot was removed from it, and tries again soon", async () => {
  const { deps, posts, outcomes } = recordingDeps();
  const client = deps.clientFor("sealed");
  const joined: unknown[] = [];
  const refusal = (code: string) =>
    new SlackCallError("chat.postMessage", { code, retryAfterMs: null });
  client.conversations = {
    join: (args: unknown) => (joined.push(args), Promise.resolve({ ok: true })),
  } as unknown as SlackWebClient["conversations"];
  const retries: number[] = [];
  deps.record = (_send, outcome) => {
    outcomes.push(outcome.state);
    if (outcome.state === "pending") retries.push(outcome.retryInMs);
    return Promise.resolve();
  };
  client.chat.postMessage = (args) => {
    posts.push(args as unknown as Record<string, unknown>);
    return Promise.reject(refusal("not_in_channel"));
  };
  const send = claimed({});
  await sendMirror(deps, send);
  assert.deepEqual(joined, [{ channel: send.thread!.channelId }]);
  assert.deepEqual([outcomes, retries], [["pending"], [1_000]]);
  // Joining failed (a private channel, say), or the send's attempts are used up: given up.
  client.conversations.join = () =>
    Promise.reject(refusal("method_not_supported_for_channel_type"));
  await sendMirror(deps, send);
  client.conversations.join = (args) => (joined.push(args), Promise.resolve({ ok: true }));
  await sendMirror(deps, { ...send, attempts: 99 });
  // A refusal joining cannot help is not worth a join.
  client.chat.postMessage = () => Promise.reject(refusal("channel_not_found"));
  await sendMirror(deps, send);
  assert.deepEqual(outcomes, ["pending", "failed", "failed", "failed"]);
  assert.equal(joined.length, 2);
});
