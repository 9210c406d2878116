/** Flow documents shared by the Flow tests of several channels. */

/**
 * A Flow whose first step (`ask`) is the WhatsApp template `confirm_order` offering quick replies
 * with the given payloads, mapped by `on`; `nodes` adds further nodes.
 */
export function templateFlow(
  payloads: string[],
  on: Record<string, string>,
  nodes: Record<string, unknown> = {},
) {
  const components = payloads.map((payload, index) => ({
    type: "button",
    sub_type: "quick_reply",
    index: String(index),
    parameters: [{ type: "payload", payload }],
  }));
  return {
    start: "ask",
    nodes: {
      ask: {
        message: {
          message_type: "template",
          content: { name: "confirm_order", language: "en_US", components },
        },
        on,
      },
      ...nodes,
    },
  };
}

/**
 * A Flow whose first step (`welcome`) asks "What do you need?" with `buttons`, mapped by `on`;
 * `nodes` adds further nodes.
 */
export function buttonsFlow(
  buttons: { id: string; title: string }[],
  on: Record<string, string>,
  nodes: Record<string, unknown> = {},
) {
  return {
    start: "welcome",
    nodes: {
      welcome: {
        message: { message_type: "buttons", content: { text: "What do you need?", buttons } },
        on,
      },
      ...nodes,
    },
  };
}
