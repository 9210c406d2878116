/**
 * Whom a WhatsApp send goes to: a customer's phone number (their WhatsApp id) or, for a customer
 * who hides it behind a username, their business-scoped user id (BSUID). Meta takes the first as
 * `to` and the second as `recipient` (when both are sent `to` wins, so only one ever is). Pure.
 */

/** A send's addressee: a WhatsApp id (phone number) or a business-scoped user id. */
export type WhatsAppRecipient = { kind: "phone"; id: string } | { kind: "user"; id: string };

/** The fields of a Graph API messages request that name `recipient`. */
export function recipientFields(
  recipient: WhatsAppRecipient,
): { to: string } | { recipient: string } {
  return recipient.kind === "phone" ? { to: recipient.id } : { recipient: recipient.id };
}
