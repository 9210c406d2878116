/**
 * Look-alikes of the formatting markers of Slack's mrkdwn and WhatsApp, which share `*_~` and the
 * backtick and have no escape: a `*` meant as itself can pair with another and bold what lies
 * between, so a marker that must stay literal (escaped in Markdown, or inside a title set in bold)
 * is shown as its look-alike, which formats nothing.
 */
const MARKER_LOOKALIKES: Record<string, string> = {
  "*": "\u2217", // ∗ asterisk operator
  "_": "\u02CD", // ˍ modifier letter low macron
  "~": "\u223C", // ∼ tilde operator
  "`": "\u02CB", // ˋ modifier letter grave accent
};

/** `text` with the formatting markers replaced by look-alikes that format nothing. */
export function literalMarkers(text: string): string {
  return text.replace(/[*_~`]/g, (marker) => MARKER_LOOKALIKES[marker]);
}
