import assert from "node:assert/strict";
import { SlackCallError, type SlackWebClient } from "./web_client.ts";
import type { ClaimedMirror } from "../../db/slack_sends.ts";
import { type MirrorDeps, ROOT_EVENT_TYPE, sendMirror } from "./mirror.ts";

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
    queuedAt: 1_800_000_000,
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
    installation: { teamId: "T1", channelId: "C1", botTokenSealed: "sealed", rateLimitedForMs: 0 },
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

/** A conversation's first send: no thread yet, queued at `queuedAt`. */
function firstSend(attempts: number): ClaimedMirror {
  return { ...claimed({}), attempts, queuedAt: 1_800_000_000.5, thread: null };
}

/** Deps whose channel history lists `listed` (newest first) and whose root post is cut. */
function cutRootDeps(listed: Record<string, unknown>[]) {
  const recording = recordingDeps();
  const threads: string[] = [];
  const searches: Record<string, unknown>[] = [];
  const client = recording.deps.clientFor("sealed");
  const post = client.chat.postMessage;
  client.chat.postMessage = (args) => {
    if (args.thread_ts !== undefined) return post(args);
    recording.posts.push(args as unknown as Record<string, unknown>);
    return Promise.reject(
      new SlackCallError("chat.postMessage", { code: "request_error", retryAfterMs: null }, {
        answered: true,
      }),
    );
  };
  client.conversations = {
    history: (args: object) => {
      searches.push(args as unknown as Record<string, unknown>);
      return Promise.resolve({ ok: true, messages: listed, has_more: false });
    },
  } as unknown as SlackWebClient["conversations"];
  recording.deps.saveThread = (thread) => (threads.push(thread.ts), Promise.resolve());
  return { ...recording, threads, searches };
}

const ourRoot = {
  type: "message",
  ts: "1800000001.000200",
  metadata: { event_type: ROOT_EVENT_TYPE, event_payload: { app_id: 1, chat_id: 3 } },
};

Deno.test("sendMirror finds a root post whose answer was cut by its metadata, and opens no second thread", async () => {
  const otherChat = { ...ourRoot, ts: "1800000001.000300", metadata: { ...ourRoot.metadata } };
  otherChat.metadata.event_payload = { app_id: 1, chat_id: 4 };
  const otherApp = { ...ourRoot, ts: "1800000001.000400", metadata: { ...ourRoot.metadata } };
  otherApp.metadata.event_payload = { app_id: 2, chat_id: 3 };
  const { deps, posts, threads, searches, outcomes } = cutRootDeps([
    otherApp,
    otherChat,
    { type: "message", ts: "1800000001.000250", text: "chatter" },
    ourRoot,
  ]);
  await sendMirror(deps, firstSend(0));
  assert.deepEqual(threads, [ourRoot.ts]);
  assert.deepEqual(posts.map((post) => post.thread_ts ?? "root"), ["root", ourRoot.ts]);
  assert.deepEqual(posts[0].metadata, ourRoot.metadata);
  assert.deepEqual(searches.map((search) => [search.oldest, search.include_all_metadata]), [
    ["1799999700.500000", true],
  ]);
  assert.deepEqual(outcomes, ["succeeded"]);
});

Deno.test("sendMirror looks for a root not yet listed again before it posts it on the retry", async () => {
  const first = cutRootDeps([]);
  await sendMirror(first.deps, firstSend(0));
  assert.deepEqual(first.threads, []);
  assert.deepEqual(first.outcomes, ["pending"]);
  // The retry finds it listed now and posts only the message.
  const retry = cutRootDeps([ourRoot]);
  await sendMirror(retry.deps, firstSend(1));
  assert.deepEqual(retry.threads, [ourRoot.ts]);
  assert.deepEqual(retry.posts.map((post) => post.thread_ts ?? "root"), [ourRoot.ts]);
  assert.deepEqual(retry.outcomes, ["succeeded"]);
});

Deno.test("sendMirror posts a conversation's first root without reading the channel's history", async () => {
  const { deps, posts, searches, threads } = cutRootDeps([ourRoot]);
  const client = deps.clientFor("sealed");
  client.chat.postMessage = (args) => {
    posts.push(args as unknown as Record<string, unknown>);
    return Promise.resolve({ ok: true, ts: `1800000002.00000${posts.length}` });
  };
  await sendMirror(deps, firstSend(0));
  assert.deepEqual(searches, []);
  assert.deepEqual(threads, ["1800000002.000001"]);
  assert.equal(posts.length, 2);
});
