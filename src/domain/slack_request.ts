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

/**
 * The bytes to store of a request of `kind` whose body is `raw` and document `document` (see
 * {@linkcode parseSlackRequest}): `raw` itself, unless the document carries Slack's legacy
 * verification token (`token`, sent in every event and click). That token is a secret of the
 * Slack app; Parley verifies with the signing secret and never reads it, so the stored copy is
 * the document without it (CONTRACT §7: no secret stored in clear) — nothing else is changed.
 */
export function storableSlackBody(
  kind: "event" | "action",
  raw: Uint8Array,
  document: SlackDocument,
): Uint8Array {
  if (document === null || typeof document !== "object" || !Object.hasOwn(document, "token")) {
    return raw;
  }
  const { token: _token, ...kept } = document;
  if (kind === "event") return new TextEncoder().encode(JSON.stringify(kept));
  const form = new URLSearchParams(new TextDecoder().decode(raw));
  form.set("payload", JSON.stringify(kept));
  return new TextEncoder().encode(form.toString());
}

/** The longest id read from a request: Slack's are a dozen or two characters. */
export const MAX_SLACK_ID_LENGTH = 255;

/**
 * Whether `value` can be one of Slack's ids (a team, channel, user, file, event id or a message
 * `ts`): a well-formed string (no lone surrogate, which jsonb refuses) of 1 to 255 characters
 * without control characters. Ids go into keys and
 * unique indexes: a NUL failed its statement (PostgreSQL text cannot hold one), and an id
 * longer than an index row allows failed it too, at every retry. A request naming such an id
 * is not one of Slack's: it changes nothing.
 */
export function isSlackId(value: unknown): value is string {
  return typeof value === "string" && value.length > 0 && value.length <= MAX_SLACK_ID_LENGTH &&
    value.isWellFormed() && !/\p{Cc}/u.test(value);
}

/** The workspace a request's document comes from ("" when it names none, or no id). */
export function slackTeamOf(document: SlackDocument): string {
  const team = document?.team_id ?? document?.team?.id;
  return isSlackId(team) ? team : "";
}

/** Where a request happened: the installation, and what the request's envelope says. */
export interface SlackRequestContext {
  /** The installation's workspace. */
  teamId: string;
  /**
   * The workspace's organisation (Enterprise Grid): the one stored at install, else the one the
   * envelope names. Null or absent when the workspace belongs to none.
   */
  enterpriseId?: unknown;
  /**
   * The envelope's `is_ext_shared_channel`: false means the channel is shared with no other
   * organisation, so everyone in it is one of the business's people.
   */
  externallyShared?: unknown;
  /** Whether the request names an Enterprise Grid organisation anywhere (a click may). */
  gridNamed?: boolean;
}

/**
 * Whether a message or a click comes from one of the business's own people, by the team its
 * author names: a message's `user_team` (else `team`), a click's `user.team_id` (which names the
 * organisation's id in Enterprise Grid). In a channel shared with other organisations (Slack
 * Connect), their members' posts and clicks name their own team: they are not agents.
 *
 * - `"member"`: the channel is shared with no other organisation; no team is named (Slack's
 *   older payloads name none); or the team named is the workspace or its organisation.
 * - `"outsider"`: another team is named, and no Enterprise Grid organisation is involved (a
 *   workspace outside Grid has no other team of its own).
 * - `"ask"`: another team is named where an organisation is involved: it may be another of the
 *   organisation's workspaces. The author's profile decides ({@linkcode isOrganisationProfile}).
 */
export function judgeAuthorTeam(
  authorTeam: unknown,
  context: SlackRequestContext,
): "member" | "outsider" | "ask" {
  if (context.externallyShared === false) return "member";
  if (typeof authorTeam !== "string" || authorTeam === "") return "member";
  const organisation = organisationOf(context);
  if (authorTeam === context.teamId || authorTeam === organisation) return "member";
  return organisation !== null || context.gridNamed === true ? "ask" : "outsider";
}

/**
 * Whether a user's profile (`users.info`'s `user`, read with the installation's bot token) is one
 * of the business's people: their home team is the workspace or its organisation, or they belong
 * to that organisation (`enterprise_user.enterprise_id`) or to the workspace among its teams
 * (`enterprise_user.teams`). A Slack Connect member of another organisation names theirs.
 */
export function isOrganisationProfile(
  user: SlackDocument,
  context: Pick<SlackRequestContext, "teamId" | "enterpriseId">,
): boolean {
  const organisation = organisationOf(context);
  const home = user?.team_id;
  if (typeof home === "string" && (home === context.teamId || home === organisation)) return true;
  const enterpriseUser = user?.enterprise_user;
  if (organisation !== null && enterpriseUser?.enterprise_id === organisation) return true;
  return Array.isArray(enterpriseUser?.teams) && enterpriseUser.teams.includes(context.teamId);
}

/** The workspace's organisation id, or null when it belongs to none (or none is known). */
function organisationOf(context: Pick<SlackRequestContext, "enterpriseId">): string | null {
  const { enterpriseId } = context;
  return typeof enterpriseId === "string" && enterpriseId !== "" ? enterpriseId : null;
}

/** The team the author of a message event (or of the message inside an edit) belongs to. */
export function messageAuthorTeam(message: SlackDocument): unknown {
  return message?.user_team ?? message?.team;
}
