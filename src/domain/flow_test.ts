import assert from "node:assert/strict";
import { advanceFlow, parseFlow, startFlow } from "./flow.ts";
import { AppError } from "./app_error.ts";

/** The contract's sample Flow (CONTRACT §4.1). */
const SAMPLE = {
  start: "welcome",
  nodes: {
    welcome: {
      message: {
        message_type: "buttons",
        content: {
          text: "Hi! What do you need?",
          buttons: [{ id: "sales", title: "Sales" }, { id: "help", title: "Support" }],
        },
      },
      on: { sales: "sales", help: "handoff" },
    },
    sales: {
      message: { message_type: "text", content: "A sales rep will be with you shortly." },
      then: "handoff",
    },
  },
};

function refusal(input: unknown): string {
  try {
    parseFlow(input);
  } catch (error) {
    assert.ok(error instanceof AppError);
    assert.equal(error.status, 400);
    return error.message;
  }
  assert.fail("the Flow was accepted");
}

function withNodes(nodes: Record<string, unknown>, start = "a"): unknown {
  return { start, nodes };
}

const text = (content: string) => ({ message_type: "text", content });

Deno.test("parseFlow accepts the contract's sample and keeps its shape", () => {
  assert.deepEqual(parseFlow(SAMPLE), SAMPLE);
});

Deno.test("parseFlow drops unknown keys of rich content as a sent message would", () => {
  const flow = parseFlow(withNodes({
    a: {
      message: {
        message_type: "card",
        content: { title: "Plans", colour: "red" },
      },
    },
  }));
  assert.deepEqual(flow.nodes.a.message.content, { title: "Plans" });
});

Deno.test("parseFlow refuses each kind of broken Flow naming the offending path", () => {
  const cases: [string, unknown, string][] = [
    ["not an object", "flow", "Invalid flow: a Flow is a JSON object"],
    ["no start", { nodes: { a: { message: text("x") } } }, "Invalid flow: start is required"],
    ["no nodes", withNodes({}), "Invalid flow: nodes must have at least one node"],
    [
      "unknown start",
      withNodes({ a: { message: text("x") } }, "b"),
      'Invalid flow: start: unknown node "b"',
    ],
    [
      "bad node name",
      withNodes({ "a b": { message: text("x") } }, "a b"),
      "Invalid flow: start must be 1 to 64 letters, digits, _ or -",
    ],
    [
      "bad node name, start fine",
      withNodes({ a: { message: text("x") }, "a b": { message: text("y") } }, "a"),
      "Invalid flow: nodes.a b: a node name must be 1 to 64 letters, digits, _ or -",
    ],
    [
      "reserved node name",
      withNodes({ handoff: { message: text("x") } }, "handoff"),
      "Invalid flow: nodes.handoff is a reserved name",
    ],
    [
      "unknown message type",
      withNodes({ a: { message: { message_type: "video", content: "x" } } }),
      "Invalid flow: nodes.a.message.message_type must be one of: text, markdown,",
    ],
    [
      "object content for text",
      withNodes({ a: { message: { message_type: "text", content: { text: "x" } } } }),
      "Invalid flow: nodes.a.message.content must be a string for message_type text",
    ],
    [
      "string content for buttons",
      withNodes({ a: { message: { message_type: "buttons", content: "x" } } }),
      "Invalid flow: nodes.a.message.content must be a JSON object for message_type buttons",
    ],
    [
      "blank text",
      withNodes({ a: { message: text("  ") } }),
      "Invalid flow: nodes.a.message.content is required",
    ],
    [
      "invalid rich content",
      withNodes({
        a: { message: { message_type: "buttons", content: { text: "x", buttons: [{ id: "b" }] } } },
      }),
      "Invalid flow: nodes.a.message: content is not valid for message_type buttons: " +
      "buttons.0.title is required",
    ],
    [
      "both on and then",
      withNodes({
        a: {
          message: {
            message_type: "buttons",
            content: { text: "x", buttons: [{ id: "b", title: "B" }] },
          },
          on: { b: "handoff" },
          then: "handoff",
        },
      }),
      'Invalid flow: nodes.a has both "on" and "then"',
    ],
    [
      "on without buttons",
      withNodes({ a: { message: text("x"), on: { b: "handoff" } } }),
      "Invalid flow: nodes.a.on: the message offers no buttons",
    ],
    [
      "on names a button the message lacks",
      withNodes({
        a: {
          message: {
            message_type: "buttons",
            content: { text: "x", buttons: [{ id: "b", title: "B" }] },
          },
          on: { b: "handoff", c: "close" },
        },
      }),
      "Invalid flow: nodes.a.on.c: not a button of the message",
    ],
    [
      "on leads to an unknown node",
      withNodes({
        a: {
          message: {
            message_type: "buttons",
            content: { text: "x", buttons: [{ id: "b", title: "B" }] },
          },
          on: { b: "nowhere" },
        },
      }),
      'Invalid flow: nodes.a.on.b: unknown node "nowhere"',
    ],
    [
      "then leads to an unknown node",
      withNodes({ a: { message: text("x"), then: "nowhere" } }),
      'Invalid flow: nodes.a.then: unknown node "nowhere"',
    ],
    [
      "then loops",
      withNodes({
        a: { message: text("x"), then: "b" },
        b: { message: text("y"), then: "a" },
      }),
      'Invalid flow: nodes.b.then: loops back to "a" without a click',
    ],
    [
      "then loops onto itself",
      withNodes({ a: { message: text("x"), then: "a" } }),
      'Invalid flow: nodes.a.then: loops back to "a" without a click',
    ],
  ];
  for (const [name, input, expected] of cases) {
    assert.ok(refusal(input).startsWith(expected), `${name}: ${refusal(input)}`);
  }
});

Deno.test("parseFlow allows a click to loop back to an earlier node", () => {
  const flow = parseFlow(withNodes({
    a: {
      message: {
        message_type: "buttons",
        content: { text: "x", buttons: [{ id: "again", title: "Again" }] },
      },
      on: { again: "b" },
    },
    b: { message: text("once more"), then: "a" },
  }));
  assert.equal(advanceFlow(flow, "a", "again")?.sends.length, 2);
});

Deno.test("parseFlow maps the buttons of every card of a carousel", () => {
  const card = (id: string) => ({ title: id, buttons: [{ id, title: id.toUpperCase() }] });
  const flow = parseFlow(withNodes({
    a: {
      message: { message_type: "carousel", content: { cards: [card("x"), card("y")] } },
      on: { x: "close", y: "handoff" },
    },
  }));
  assert.equal(advanceFlow(flow, "a", "x")?.stop, "close");
  assert.equal(advanceFlow(flow, "a", "y")?.stop, "handoff");
});

Deno.test("startFlow sends the start node and waits for its buttons", () => {
  const step = startFlow(parseFlow(SAMPLE));
  assert.equal(step.stop, "waiting");
  assert.equal(step.sends.length, 1);
  assert.equal(step.sends[0].node, "welcome");
  assert.equal(step.sends[0].messageType, "buttons");
  assert.deepEqual(JSON.parse(step.sends[0].content), SAMPLE.nodes.welcome.message.content);
  assert.deepEqual(step.sends[0].payload, SAMPLE.nodes.welcome.message.content);
});

/** The step of SAMPLE's `sales` node: its text, then the handoff. */
const SALES_STEP = {
  sends: [{
    node: "sales",
    messageType: "text",
    content: "A sales rep will be with you shortly.",
    payload: null,
  }],
  stop: "handoff",
};

Deno.test("advanceFlow follows then chains to the exit they end in", () => {
  const flow = parseFlow(SAMPLE);
  assert.deepEqual(advanceFlow(flow, "welcome", "sales"), SALES_STEP);
  assert.deepEqual(advanceFlow(flow, "welcome", "help"), { sends: [], stop: "handoff" });
});

Deno.test("advanceFlow ends at a node without on or then", () => {
  const flow = parseFlow(
    withNodes({ a: { message: text("x"), then: "b" }, b: { message: text("y") } }),
  );
  const step = startFlow(flow);
  assert.deepEqual(step.sends.map((send) => send.content), ["x", "y"]);
  assert.equal(step.stop, "end");
});

Deno.test("advanceFlow answers null for a node the Flow no longer has, or a button it leaves out", () => {
  const flow = parseFlow(SAMPLE);
  assert.equal(advanceFlow(flow, "gone", "sales"), null);
  const unmapped = structuredClone(SAMPLE);
  delete (unmapped.nodes.welcome.on as Record<string, string>).help;
  assert.equal(advanceFlow(parseFlow(unmapped), "welcome", "help"), null, "offered, not mapped");
});

Deno.test("advanceFlow shows the node again when its message no longer offers the button", () => {
  // The Flow was replaced since the message: "gone" was one of the old version's buttons.
  const flow = parseFlow(SAMPLE);
  const again = advanceFlow(flow, "welcome", "gone");
  assert.deepEqual(again?.sends.map((send) => send.node), ["welcome"]);
  assert.equal(again?.stop, "waiting");
  // A node that now offers no buttons at all is shown and goes on from there.
  assert.deepEqual(advanceFlow(flow, "sales", "sales"), SALES_STEP);
});

Deno.test("parseFlow refuses __proto__ as a node name or a mapped button id, saying so", () => {
  // As JSON.parse builds them: "__proto__" an own key, not the prototype.
  const node = JSON.parse(
    '{"start":"a","nodes":{"a":{"message":{"message_type":"text","content":"x"}},' +
      '"__proto__":{"message":{"message_type":"text","content":"y"}}}}',
  );
  assert.equal(refusal(node), "Invalid flow: nodes.__proto__ is a reserved name");
  const button = JSON.parse(
    '{"start":"a","nodes":{"a":{"message":{"message_type":"buttons","content":' +
      '{"text":"t","buttons":[{"id":"__proto__","title":"P"}]}},"on":{"__proto__":"close"}}}}',
  );
  assert.equal(
    refusal(button),
    'Invalid flow: nodes.a: button id "__proto__" is reserved in a Flow',
  );
  // Mapped in `on` beside the real buttons, it was dropped unseen.
  const extra = JSON.parse(
    '{"start":"a","nodes":{"a":{"message":{"message_type":"buttons","content":' +
      '{"text":"t","buttons":[{"id":"x","title":"X"}]}},' +
      '"on":{"x":"close","__proto__":"no_such_node"}}}}',
  );
  assert.equal(
    refusal(extra),
    'Invalid flow: nodes.a: button id "__proto__" is reserved in a Flow',
  );
});
