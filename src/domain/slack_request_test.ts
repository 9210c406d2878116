import assert from "node:assert/strict";
import { isFromWorkspaceMember, messageAuthorTeam, slackTeamOf } from "./slack_request.ts";

Deno.test("isFromWorkspaceMember() admits the workspace's own team, its organisation and an unnamed team only", () => {
  assert.equal(isFromWorkspaceMember("T1", "T1"), true);
  assert.equal(isFromWorkspaceMember(undefined, "T1"), true, "older payloads name no team");
  assert.equal(isFromWorkspaceMember("", "T1"), true);
  assert.equal(isFromWorkspaceMember("E1", "T1", "E1"), true, "the workspace's organisation");
  assert.equal(isFromWorkspaceMember("T2", "T1"), false, "another organisation's member");
  assert.equal(isFromWorkspaceMember("T2", "T1", "E1"), false);
  assert.equal(isFromWorkspaceMember(["T1"], "T1"), true, "not a team id: nothing to compare");
});

Deno.test("messageAuthorTeam() reads user_team, else team", () => {
  assert.equal(messageAuthorTeam({ user_team: "T2", team: "T1" }), "T2");
  assert.equal(messageAuthorTeam({ team: "T1" }), "T1");
  assert.equal(messageAuthorTeam(null), undefined);
  assert.equal(slackTeamOf({ team: { id: "T9" } }), "T9");
});
