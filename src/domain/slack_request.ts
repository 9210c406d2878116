/**
 * What a request from Slack says before anything is looked up: its document (an event's JSON
 * body, or an interaction's `payload` form field) and the workspace it comes from, whose requests
 * are applied in the order they arrived.
 */

/** A Slack request's document, as Slack sent it: its shape is checked where it is read. */
// deno-lint-ignore no-explicit-any
export type SlackDocument = any;

/** The document of a request of `kind` whose body is `text`; null when it is not JSON. */
export function parseSlackRequest(kind: "event" | "action", text: string): SlackDocument {
  try {
    return kind === "event"
      ? JSON.parse(text)
      : JSON.parse(new URLSearchParams(text).get("payload") ?? "null");
  } catch {
    return null;
  }
}

/** The workspace a request's document comes from ("" when it names none). */
export function slackTeamOf(document: SlackDocument): string {
  return String(document?.team_id ?? document?.team?.id ?? "");
}
