import assert from "node:assert/strict";
import {
  isOrganisationProfile,
  isSlackId,
  judgeAuthorTeam,
  MAX_SLACK_ID_LENGTH,
  messageAuthorTeam,
  parseSlackRequest,
  slackTeamOf,
  storableSlackBody,
} from "./slack_request.ts";

Deno.test("judgeAuthorTeam() admits the workspace's own team, its organisation and an unnamed team", () => {
  const own = { teamId: "T1" };
  assert.equal(judgeAuthorTeam("T1", own), "member");
  assert.equal(judgeAuthorTeam(undefined, own), "member", "older payloads name no team");
  assert.equal(judgeAuthorTeam("", own), "member");
  assert.equal(judgeAuthorTeam("E1", { ...own, enterpriseId: "E1" }), "member", "its organisation");
  assert.equal(judgeAuthorTeam(["T1"], own), "member", "not a team id: nothing to compare");
});

Deno.test("judgeAuthorTeam() takes another team for an outsider where no organisation is involved", () => {
  assert.equal(judgeAuthorTeam("T2", { teamId: "T1" }), "outsider");
  assert.equal(judgeAuthorTeam("T2", { teamId: "T1", externallyShared: true }), "outsider");
  assert.equal(judgeAuthorTeam("T2", { teamId: "T1", enterpriseId: null }), "outsider");
  assert.equal(judgeAuthorTeam("E9", { teamId: "T1", enterpriseId: "" }), "outsider");
});

Deno.test("judgeAuthorTeam() leaves another team to the author's profile where an organisation is involved", () => {
  // It may be another of the organisation's workspaces, or another organisation.
  assert.equal(judgeAuthorTeam("T2", { teamId: "T1", enterpriseId: "E1" }), "ask");
  assert.equal(judgeAuthorTeam("E9", { teamId: "T1", enterpriseId: "E1" }), "ask");
  assert.equal(judgeAuthorTeam("T2", { teamId: "T1", gridNamed: true }), "ask");
});

Deno.test("judgeAuthorTeam() admits everyone in a channel shared with no other organisation", () => {
  // An Enterprise Grid colleague from another of the organisation's workspaces names that one.
  assert.equal(judgeAuthorTeam("T2", { teamId: "T1", externallyShared: false }), "member");
  assert.equal(
    judgeAuthorTeam("E9", { teamId: "T1", enterpriseId: "E1", externallyShared: false }),
    "member",
  );
});

Deno.test("isOrganisationProfile() admits a user of the workspace or its organisation only", () => {
  const grid = { teamId: "T1", enterpriseId: "E1" };
  assert.equal(isOrganisationProfile({ team_id: "T1" }, { teamId: "T1" }), true);
  assert.equal(isOrganisationProfile({ team_id: "E1" }, grid), true);
  assert.equal(
    isOrganisationProfile({ team_id: "T2", enterprise_user: { enterprise_id: "E1" } }, grid),
    true,
    "a colleague from another of the organisation's workspaces",
  );
  assert.equal(
    isOrganisationProfile({ team_id: "T2", enterprise_user: { teams: ["T3", "T1"] } }, grid),
    true,
    "one of the workspace's teams",
  );
  assert.equal(
    isOrganisationProfile({ team_id: "T9", enterprise_user: { enterprise_id: "E9" } }, grid),
    false,
    "another organisation's member",
  );
  assert.equal(isOrganisationProfile({ team_id: "T9" }, grid), false);
  assert.equal(
    isOrganisationProfile({ team_id: "T9", enterprise_user: { enterprise_id: null } }, {
      teamId: "T1",
      enterpriseId: null,
    }),
    false,
    "no organisation to compare",
  );
  assert.equal(isOrganisationProfile(null, grid), false);
});

Deno.test("messageAuthorTeam() reads user_team, else team", () => {
  assert.equal(messageAuthorTeam({ user_team: "T2", team: "T1" }), "T2");
  assert.equal(messageAuthorTeam({ team: "T1" }), "T1");
  assert.equal(messageAuthorTeam(null), undefined);
  assert.equal(slackTeamOf({ team: { id: "T9" } }), "T9");
});

Deno.test("storableSlackBody() drops the legacy verification token and keeps everything else", () => {
  const encode = (text: string) => new TextEncoder().encode(text);
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  const eventText =
    '{"token":"XXYYZZ","team_id":"T1","event":{"type":"message","text":"caf\\u00e9 ✓"},"n":1.5}';
  const event = parseSlackRequest("event", eventText);
  const storedEvent = parseSlackRequest(
    "event",
    decode(storableSlackBody("event", encode(eventText), event)),
  );
  assert.deepEqual(storedEvent, {
    team_id: "T1",
    event: { type: "message", text: "café ✓" },
    n: 1.5,
  });

  const payload = { type: "block_actions", token: "XXYYZZ", team: { id: "T1" }, actions: [] };
  const actionText = new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
  const action = parseSlackRequest("action", actionText);
  const storedAction = decode(storableSlackBody("action", encode(actionText), action));
  assert.ok(!storedAction.includes("XXYYZZ"));
  assert.deepEqual(parseSlackRequest("action", storedAction), {
    type: "block_actions",
    team: { id: "T1" },
    actions: [],
  });
});

Deno.test("storableSlackBody() stores a body without a token byte for byte", () => {
  const raw = new TextEncoder().encode(' {"team_id":"T1"} ');
  assert.equal(storableSlackBody("event", raw, { team_id: "T1" }), raw);
  assert.equal(storableSlackBody("event", raw, null), raw);
  assert.equal(storableSlackBody("event", raw, ["token"]), raw);
});

Deno.test("isSlackId() takes strings of 1 to 255 characters without control characters", () => {
  for (
    const id of [
      "T0123",
      "C0SUPPORT",
      "1800000000.000100",
      "Ev01ABC",
      "x".repeat(MAX_SLACK_ID_LENGTH),
    ]
  ) {
    assert.ok(isSlackId(id), id);
  }
  for (
    const id of [
      "",
      "C\u00001",
      "C1\n",
      "\u007f",
      "C1\ud800",
      "x".repeat(MAX_SLACK_ID_LENGTH + 1),
      5,
      null,
      ["T1"],
    ]
  ) {
    assert.ok(!isSlackId(id), JSON.stringify(id));
  }
});

Deno.test("slackTeamOf() names no workspace for a team that is no id", () => {
  assert.equal(slackTeamOf({ team_id: "T1" }), "T1");
  assert.equal(slackTeamOf({ team: { id: "T2" } }), "T2");
  assert.equal(slackTeamOf({ team_id: "T\u00001" }), "");
  assert.equal(slackTeamOf({ team_id: 7 }), "");
  assert.equal(slackTeamOf(null), "");
});
