/**
 * Web API clients per bot token: a `WebClient` keeps its own queue and retry state, so one is
 * made per token and reused; tokens arrive sealed and are opened once.
 */
import type { WebClient } from "@slack/web-api";
import type { SecretBox } from "../../crypto/secret_box.ts";
import { createLruCache } from "../../cache/lru_cache.ts";
import { createSlackWebClient, type SlackWebClientOptions } from "./web_client.ts";

/** A function answering the client of a sealed bot token. */
export type SlackClients = (botTokenSealed: string) => WebClient;

/** Creates the per-token client cache for `apiUrl` (`SLACK_API_URL`). */
export function createSlackClients(
  secretBox: SecretBox,
  apiUrl: string,
  options: SlackWebClientOptions = {},
): SlackClients {
  const clients = createLruCache<string, WebClient>(1_000);
  return (sealed) => {
    let client = clients.get(sealed);
    if (!client) {
      client = createSlackWebClient(secretBox.open(sealed), apiUrl, options);
      clients.set(sealed, client);
    }
    return client;
  };
}
