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

/** Where a request happened, as its envelope says. */
export interface SlackRequestContext {
  /** The installation's workspace. */
  teamId: string;
  /** The organisation (Enterprise Grid) the request names, if any. */
  enterpriseId?: unknown;
  /**
   * The envelope's `is_ext_shared_channel`: false means the channel is shared with no other
   * organisation, so everyone in it is one of the business's people.
   */
  externallyShared?: unknown;
}

/**
 * Whether a message or a click comes from a member of the installation's own workspace, by the
 * team its author belongs to: a message's `user_team` (else `team`), a click's `user.team_id`. In
 * a channel shared with other organisations (Slack Connect), their members' posts and clicks name
 * their own team: they are not the business's agents. An author is the workspace's own when the
 * channel is shared with no other organisation, when no team is named (Slack's older payloads
 * name none), or when the team named is the workspace or its organisation.
 */
export function isFromWorkspaceMember(authorTeam: unknown, context: SlackRequestContext): boolean {
  if (context.externallyShared === false) return true;
  if (typeof authorTeam !== "string" || authorTeam === "") return true;
  return authorTeam === context.teamId ||
    (typeof context.enterpriseId === "string" && authorTeam === context.enterpriseId);
}

/** The team the author of a message event (or of the message inside an edit) belongs to. */
export function messageAuthorTeam(message: SlackDocument): unknown {
  return message?.user_team ?? message?.team;
}
