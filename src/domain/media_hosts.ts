/**
 * Where the media proxies may send a platform's token: only to the platform's own file hosts, over
 * HTTPS — or to the API address Parley is configured with (a local fake in tests), over that
 * address's own scheme, so that a link the platform answered with never carries the token in
 * cleartext where the configured API is reached over HTTPS.
 */

/** Whether `url` is on the configured API's origin (its scheme and host). */
function onConfiguredOrigin(url: URL, apiUrl: string): boolean {
  const api = new URL(apiUrl);
  return url.protocol === api.protocol && url.host === api.host;
}

function parsed(url: string): URL | null {
  try {
    return new URL(url);
  } catch {
    return null;
  }
}

/** Whether a Slack file's `url_private` may be fetched with the bot token. */
export function isSlackFileHost(url: string, apiUrl: string): boolean {
  const target = parsed(url);
  if (!target) return false;
  if (onConfiguredOrigin(target, apiUrl)) return true;
  return target.protocol === "https:" &&
    (target.host === "files.slack.com" || target.host === new URL(apiUrl).host);
}

/** Whether a WhatsApp media URL may be fetched with the access token. */
export function isMetaMediaHost(url: string, graphUrl: string): boolean {
  const target = parsed(url);
  if (!target) return false;
  if (onConfiguredOrigin(target, graphUrl)) return true;
  return target.protocol === "https:" && target.port === "" &&
    /\.(fbsbx\.com|whatsapp\.net|facebook\.com)$/.test(target.hostname);
}
