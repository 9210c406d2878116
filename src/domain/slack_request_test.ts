import assert from "node:assert/strict";
import { isFromWorkspaceMember, messageAuthorTeam, slackTeamOf } from "./slack_request.ts";

Deno.test("isFromWorkspaceMember() admits the workspace's own team, its organisation and an unnamed team only", () => {
  const own = { teamId: "T1" };
  assert.equal(isFromWorkspaceMember("T1", own), true);
  assert.equal(isFromWorkspaceMember(undefined, own), true, "older payloads name no team");
  assert.equal(isFromWorkspaceMember("", own), true);
  assert.equal(
    isFromWorkspaceMember("E1", { ...own, enterpriseId: "E1" }),
    true,
    "its organisation",
  );
  assert.equal(isFromWorkspaceMember("T2", own), false, "another organisation's member");
  assert.equal(isFromWorkspaceMember("T2", { ...own, enterpriseId: "E1" }), false);
  assert.equal(isFromWorkspaceMember("T2", { ...own, externallyShared: true }), false);
  assert.equal(isFromWorkspaceMember(["T1"], own), true, "not a team id: nothing to compare");
});

Deno.test("isFromWorkspaceMember() admits everyone in a channel shared with no other organisation", () => {
  // An Enterprise Grid colleague from another of the organisation's workspaces names that one.
  assert.equal(isFromWorkspaceMember("T2", { teamId: "T1", externallyShared: false }), true);
});

Deno.test("messageAuthorTeam() reads user_team, else team", () => {
  assert.equal(messageAuthorTeam({ user_team: "T2", team: "T1" }), "T2");
  assert.equal(messageAuthorTeam({ team: "T1" }), "T1");
  assert.equal(messageAuthorTeam(null), undefined);
  assert.equal(slackTeamOf({ team: { id: "T9" } }), "T9");
});
