/**
 * Slack's message text as a visitor reads it. Slack escapes `&`, `<` and `>` in a message's
 * `text` (`&amp;`, `&lt;`, `&gt;`) and writes links, mentions and commands in angle brackets
 * (https://docs.slack.dev/messaging/formatting-message-text): `<https://x.io|label>`,
 * `<@U123>`, `<#C123|general>`, `<!here>`, `<!date^…|fallback>`. A reply typed in Slack reaches
 * the visitor as the agent saw it: links as `label (url)` (a word Slack linked by itself as it
 * is), mentions by name, no escapes.
 */

/** Names Slack's ids stand for; an id without one is shown as it is. */
export interface SlackNames {
  /** A member's display name by user id. */
  user(id: string): string | undefined;
}

/** The ids of the members `text` mentions (`<@U123>`), to look their names up first. */
export function mentionedUsers(text: string): string[] {
  return [...new Set([...text.matchAll(/<@([A-Z0-9]+)(?:\|[^>]*)?>/g)].map((match) => match[1]))];
}

/** `text` as Slack sent it, decoded for a reader outside Slack. */
export function decodeSlackText(text: string, names: SlackNames): string {
  const decoded = text.replace(/<([^<>]*)>/g, (_whole, inner: string) => {
    const bar = inner.indexOf("|");
    const target = bar === -1 ? inner : inner.slice(0, bar);
    const label = bar === -1 ? null : inner.slice(bar + 1);
    if (target.startsWith("@")) {
      return `@${label ?? names.user(target.slice(1)) ?? target.slice(1)}`;
    }
    if (target.startsWith("#")) return `#${label ?? target.slice(1)}`;
    if (target.startsWith("!")) {
      const command = target.slice(1);
      if (label !== null) {
        return label.startsWith("@") || command.startsWith("date") ? label : `@${label}`;
      }
      return `@${command.split("^")[0]}`;
    }
    if (target.startsWith("mailto:")) return label ?? target.slice("mailto:".length);
    if (label === null || label === target) return target;
    // Slack links what looks like a domain as the agent types it (`parley.io`, `README.md`):
    // such a link reads as the word typed, not twice.
    return isAutoLink(target, label) ? label : `${label} (${target})`;
  });
  return decoded.replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&amp;", "&");
}

/**
 * Whether Slack made the link `<target|label>` of a word the agent typed: the target is the label
 * with a scheme added (`<http://parley.io|parley.io>`), and maybe a closing slash.
 */
function isAutoLink(target: string, label: string): boolean {
  const bare = target.replace(/^https?:\/\//i, "");
  return bare !== target && (bare === label || bare === `${label}/`);
}
