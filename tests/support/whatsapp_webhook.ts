/**
 * WhatsApp Cloud API webhook bodies as Meta sends them (one entry, one `messages` change of a
 * business number), for the tests and the benchmark.
 */

/** What goes into the change's `value`. */
export interface WebhookParts {
  messages?: unknown[];
  statuses?: unknown[];
  /** `contacts[]` entries: `{"profile":{"name"},"wa_id"}`. */
  contacts?: unknown[];
}

/** A webhook body for the business number `phoneNumberId`. */
export function whatsappWebhookBody(phoneNumberId: string, parts: WebhookParts) {
  const { messages = [], statuses = [], contacts = [] } = parts;
  return {
    object: "whatsapp_business_account",
    entry: [{
      id: "102290129340398",
      changes: [{
        field: "messages",
        value: {
          messaging_product: "whatsapp",
          metadata: { display_phone_number: "15550783881", phone_number_id: phoneNumberId },
          ...(messages.length > 0 ? { contacts, messages } : {}),
          ...(statuses.length > 0 ? { statuses } : {}),
        },
      }],
    }],
  };
}
