/**
 * Web API clients per bot token: a client holds back its calls after a 429, so one is
 * made per token and reused; tokens arrive sealed and are opened once.
 */
import type { SecretBox } from "../../crypto/secret_box.ts";
import { createLruCache } from "../../cache/lru_cache.ts";
import {
  createSlackWebClient,
  type SlackWebClient,
  type SlackWebClientOptions,
} from "./web_client.ts";

/** A function answering the client of a sealed bot token. */
export type SlackClients = (botTokenSealed: string) => SlackWebClient;

/** Creates the per-token client cache for `apiUrl` (`SLACK_API_URL`). */
export function createSlackClients(
  secretBox: SecretBox,
  apiUrl: string,
  options: SlackWebClientOptions = {},
): SlackClients {
  const clients = createLruCache<string, SlackWebClient>(1_000);
  return (sealed) => {
    let client = clients.get(sealed);
    if (!client) {
      client = createSlackWebClient(secretBox.open(sealed), apiUrl, options);
      clients.set(sealed, client);
    }
    return client;
  };
}
