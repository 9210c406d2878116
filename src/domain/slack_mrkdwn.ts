/**
 * Slack mrkdwn for customer-provided text: escaping of Slack's three control characters, safe
 * links, the conversion of Markdown into mrkdwn, and the splitting and truncation that keep text
 * inside Block Kit's length limits. Every string that reaches a mrkdwn field passes through here,
 * so that no customer text can form a mention (`<!channel>`, `<@U123>`) or a disguised link
 * (`<https://evil|click>`): raw `&`, `<` and `>` never survive, and the only `<…>` sequences in
 * the output are links built here from URLs whose `|`, `<`, `>` and whitespace are
 * percent-encoded. Pure: no I/O.
 */
import { literalMarkers } from "./literal_markers.ts";

/** Markdown converted to mrkdwn: text for one or more sections, or a divider (`---`). */
export type MrkdwnSegment = { kind: "text"; text: string } | { kind: "divider" };

/** The code fence, as Slack writes it; fences are closed and reopened around a split. */
const FENCE = "```";
/** Longest link (`<url|label>`) kept as a link; longer ones become text, which can be split. */
const MAX_LINK_LENGTH = 2_900;
/** The schemes a link may point to; anything else stays visible text. */
const LINK_SCHEME = /^(?:https?:\/\/|mailto:)/i;
/** A bare URL in customer text; it stops at characters Slack's link syntax reserves. */
const BARE_URL = /https?:\/\/[^\s<>|"`]+/giu;
/**
 * Punctuation that ends a sentence rather than a bare URL (a closing bracket only when it closes
 * nothing in the URL: `…/Mercury_(planet)` keeps its own).
 */
const TRAILING_PUNCTUATION = /[.,;:!?'")\]}]$/u;
/** The bracket each closing bracket closes. */
const OPENING: Record<string, string> = { ")": "(", "]": "[", "}": "{" };

/**
 * Markdown inline constructs, tried left to right at each position: a backslash escape, code
 * span, link or image, autolink (`<https://…>`), bare URL, `***strong em***`, `**strong**`,
 * `__strong__`, `~~strike~~`, `*em*`, `_em_`. Underscores count only outside words, so
 * `snake_case_name` stays as it is. Each span ends at the first closing marker after its first
 * character (`**Y** or **N**` is two spans, not one from Y to N).
 */
const INLINE_MARKDOWN = new RegExp(
  [
    "\\\\(?<escaped>[!-/:-@\\[-`{-~])",
    "(?<tick>`+)(?<code>.+?)\\k<tick>",
    // A destination may hold balanced parentheses, one level deep (`…/Mercury_(planet)`).
    "!?\\[(?<label>[^\\]]*)\\]\\((?<href>(?:[^()\\s]|\\([^()\\s]*\\))*)\\)",
    "<(?<autolink>(?:https?:\\/\\/|mailto:)[^\\s<>]+)>",
    `(?<url>${BARE_URL.source})`,
    "\\*\\*\\*(?<both>\\S(?:.*?\\S)??)\\*\\*\\*",
    "\\*\\*(?<strong>\\S(?:.*?\\S)??)\\*\\*",
    "(?<![\\p{L}\\p{N}])__(?<strong2>\\S(?:.*?\\S)??)__(?![\\p{L}\\p{N}])",
    "~~(?<strike>\\S(?:.*?\\S)??)~~",
    // Not closed by the first star of a `**` inside it (`*Note: **this** now*`).
    "\\*(?<em>[^\\s*](?:.*?[^\\s*])??)\\*(?!\\*)",
    "(?<![\\p{L}\\p{N}])_(?<em2>[^\\s_](?:[^_]*?[^\\s_])?)_(?![\\p{L}\\p{N}])",
  ].join("|"),
  "gu",
);

/** Markdown block-level lines. */
const FENCE_LINE = /^ {0,3}(`{3,}(?=[^`]*$)|~{3,})/;
const HEADING_LINE = /^ {0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$/;
const RULE_LINE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const BULLET_LINE = /^(\s*)[-*+]\s+(.*)$/;
const ORDERED_LINE = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const QUOTE_LINE = /^ {0,3}>\s?(.*)$/;

/** Escapes Slack's control characters `&`, `<` and `>` as `&amp;`, `&lt;` and `&gt;`. */
export function escapeMrkdwn(text: string): string {
  return text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

/** `url` made safe inside `<…>`, or `undefined` if it is not an http(s) or mailto URL. */
function linkTarget(url: string): string | undefined {
  if (!LINK_SCHEME.test(url) || !URL.canParse(url)) return undefined;
  return url.replace(/[\s<>|"]/gu, (char) => encodeURIComponent(char)).replaceAll("&", "&amp;");
}

/**
 * A mrkdwn link to `url` labelled `label`: `<url|label>` with the URL percent-encoded where it
 * could break out (`|`, `<`, `>`, whitespace) and the label escaped. A URL that is not http(s)
 * or mailto, or a link too long to keep whole, is rendered as visible text `label (url)`.
 */
export function mrkdwnLink(url: string, label = ""): string {
  const target = linkTarget(url);
  const text = escapeMrkdwn(label.trim());
  const link = text === "" ? `<${target}>` : `<${target}|${text}>`;
  if (target !== undefined && link.length <= MAX_LINK_LENGTH) return link;
  return text === "" ? escapeMrkdwn(url) : `${text} (${escapeMrkdwn(url)})`;
}

/** Escapes `raw`, turning what `pattern` matches into `convert(match)` instead. */
function replaceMatches(
  raw: string,
  pattern: RegExp,
  convert: (match: RegExpMatchArray) => string,
): string {
  let out = "";
  let last = 0;
  for (const match of raw.matchAll(pattern)) {
    out += escapeMrkdwn(raw.slice(last, match.index)) + convert(match);
    last = match.index! + match[0].length;
  }
  return out + escapeMrkdwn(raw.slice(last));
}

/** A bare URL as a link, leaving sentence punctuation after it as text. */
function autolink(url: string): string {
  // How many of each bracket the URL holds before `end`, kept as `end` moves back.
  const counts = new Map<string, number>();
  for (const char of url) counts.set(char, (counts.get(char) ?? 0) + 1);
  let end = url.length;
  while (end > 0 && TRAILING_PUNCTUATION.test(url[end - 1])) {
    const closing = url[end - 1];
    const opening = OPENING[closing];
    // A closing bracket that the URL opened belongs to it (`…/Mercury_(planet)`).
    if (opening !== undefined && (counts.get(opening) ?? 0) >= counts.get(closing)!) break;
    counts.set(closing, counts.get(closing)! - 1);
    end--;
  }
  return mrkdwnLink(url.slice(0, end)) + escapeMrkdwn(url.slice(end));
}

/**
 * A link's label as mrkdwn text: Slack formats no text inside a link, so emphasis wrapping the
 * whole label goes around the link instead (`[**Docs**](…)` → `*<…|Docs>*`) and its markers go.
 */
function labelledLink(href: string, label: string): string {
  const whole = /^(\*\*|__|\*|_|~~)(?=\S)(.*\S)\1$/su.exec(label.trim());
  if (whole === null) return mrkdwnLink(href, label);
  const mark = whole[1] === "~~" ? "~" : whole[1].length === 2 ? "*" : "_";
  return `${mark}${mrkdwnLink(href, whole[2])}${mark}`;
}

/** Plain customer text as mrkdwn: escaped, with bare http(s) URLs turned into links. */
export function textToMrkdwn(text: string): string {
  return replaceMatches(text.replace(/\r\n?/g, "\n"), BARE_URL, (match) => autolink(match[0]));
}

/** One line of Markdown inline syntax as mrkdwn. */
function inlineToMrkdwn(raw: string): string {
  return replaceMatches(raw, INLINE_MARKDOWN, (match) => {
    const g = match.groups!;
    if (g.escaped !== undefined) return literalMarkers(escapeMrkdwn(g.escaped));
    if (g.code !== undefined) return `\`${escapeMrkdwn(g.code)}\``;
    if (g.href !== undefined) return labelledLink(g.href, g.label);
    if (g.autolink !== undefined) return mrkdwnLink(g.autolink);
    if (g.url !== undefined) return autolink(g.url);
    if (g.both !== undefined) return `*_${inlineToMrkdwn(g.both)}_*`;
    const strong = g.strong ?? g.strong2;
    if (strong !== undefined) return `*${inlineToMrkdwn(strong)}*`;
    if (g.strike !== undefined) return `~${inlineToMrkdwn(g.strike)}~`;
    return `_${inlineToMrkdwn(g.em ?? g.em2)}_`;
  });
}

/** One Markdown line outside code as mrkdwn (headings are handled by the caller). */
function lineToMrkdwn(line: string): string {
  const bullet = BULLET_LINE.exec(line);
  if (bullet !== null) return `${bullet[1]}• ${inlineToMrkdwn(bullet[2])}`;
  const ordered = ORDERED_LINE.exec(line);
  if (ordered !== null) return `${ordered[1]}${ordered[2]}. ${inlineToMrkdwn(ordered[3])}`;
  const quote = QUOTE_LINE.exec(line);
  if (quote !== null) return `&gt; ${inlineToMrkdwn(quote[1])}`;
  return inlineToMrkdwn(line);
}

/**
 * Converts Markdown to mrkdwn segments: `**bold**` → `*bold*`, `*italic*`/`_italic_` →
 * `_italic_`, `~~strike~~` → `~strike~`, `[text](url)` → `<url|text>`, `# heading` → a bold
 * line that starts a new section, `-`/`*`/`+` items → `•` lines, `1.` items → numbered lines,
 * `> quote` → a quote, `---` → a divider; code spans and fences are kept (a fence's language
 * tag is dropped, as mrkdwn has no use for it). All text is escaped.
 */
export function markdownToMrkdwn(markdown: string): MrkdwnSegment[] {
  const segments: MrkdwnSegment[] = [];
  let lines: string[] = [];
  let fence: string | undefined;
  const flush = () => {
    const text = lines.join("\n").replace(/^\s*\n|\n\s*$/g, "");
    if (text.trim() !== "") segments.push({ kind: "text", text });
    lines = [];
  };
  for (const line of markdown.replace(/\r\n?/g, "\n").split("\n")) {
    const fenceMatch = FENCE_LINE.exec(line);
    if (fence !== undefined) {
      const closes = fenceMatch !== null && fenceMatch[1].startsWith(fence) &&
        line.trim() === fenceMatch[1];
      if (closes) fence = undefined;
      lines.push(closes ? FENCE : escapeMrkdwn(line));
    } else if (fenceMatch !== null) {
      fence = fenceMatch[1];
      lines.push(FENCE);
    } else if (RULE_LINE.test(line)) {
      flush();
      segments.push({ kind: "divider" });
    } else if (HEADING_LINE.test(line)) {
      flush();
      const heading = (HEADING_LINE.exec(line)![1] ?? "").replace(/\*\*|__/g, "");
      lines.push(heading === "" ? "" : `*${inlineToMrkdwn(heading)}*`);
    } else {
      lines.push(lineToMrkdwn(line));
    }
  }
  if (fence !== undefined) lines.push(FENCE);
  flush();
  return segments;
}

/**
 * The index at most `cut` where mrkdwn can be cut without ending inside a link `<…>`, an entity
 * (`&amp;`) or a surrogate pair; 0 if there is none.
 */
function safeCut(text: string, cut: number): number {
  let safe = cut;
  const open = text.lastIndexOf("<", safe - 1);
  if (open >= 0 && text.indexOf(">", open) >= safe) safe = open;
  const amp = text.lastIndexOf("&", safe - 1);
  if (amp >= 0 && safe - amp < 5 && text.indexOf(";", amp) >= safe) safe = amp;
  return Math.max(plainCut(text, safe), 0);
}

/** Where to cut `text` to at most `max` characters: at a space in the second half, else hard. */
function lineCut(text: string, max: number): { cut: number; skip: number } {
  let space = text.lastIndexOf(" ", max);
  while (space > max / 2) {
    if (safeCut(text, space) === space) return { cut: space, skip: 1 };
    space = text.lastIndexOf(" ", space - 1);
  }
  // 0 only if a link longer than `max` opens the text, which MAX_LINK_LENGTH rules out.
  return { cut: safeCut(text, max) || max, skip: 0 };
}

/** Splits one line into pieces of at most `max` characters, at spaces where possible. */
function splitLine(line: string, max: number): string[] {
  const pieces: string[] = [];
  let rest = line;
  while (rest.length > max) {
    const { cut, skip } = lineCut(rest, max);
    pieces.push(rest.slice(0, cut));
    rest = rest.slice(cut + skip);
  }
  pieces.push(rest);
  return pieces;
}

/** Whether `line` opens or closes a code block (an odd number of fences, the first leading). */
function togglesFence(line: string): boolean {
  return line.trimStart().startsWith(FENCE) && line.split(FENCE).length % 2 === 0;
}

/**
 * Splits mrkdwn into chunks of at most `max` characters, at line breaks where possible, then
 * at spaces, never inside a link or an entity. A code block cut in two is closed at the end of
 * one chunk and reopened at the start of the next. Blank chunks are left out.
 */
export function splitMrkdwn(text: string, max: number): string[] {
  const chunks: string[] = [];
  let lines: string[] = [];
  let size = -1;
  let fenced = false;
  const push = (line: string) => {
    lines.push(line);
    size += line.length + 1;
  };
  const flush = (last: boolean) => {
    if (fenced && !last) push(FENCE);
    const chunk = lines.join("\n").replace(/^\s*\n|\n\s*$/g, "");
    if (chunk.trim() !== "") chunks.push(chunk);
    lines = [];
    size = -1;
    if (fenced && !last) push(FENCE);
  };
  for (const line of text.split("\n")) {
    // Inside a code block a piece must leave room for the fences closing and reopening it.
    const room: number = fenced || line.includes(FENCE) ? max - 2 * (FENCE.length + 1) : max;
    for (const piece of splitLine(line, room)) {
      const fencedAfter: boolean = togglesFence(piece) ? !fenced : fenced;
      const reserve = fencedAfter ? FENCE.length + 1 : 0;
      if (lines.length > 0 && size + 1 + piece.length + reserve > max) flush(false);
      push(piece);
      fenced = fencedAfter;
    }
  }
  flush(true);
  return chunks;
}

const GRAPHEMES = new Intl.Segmenter(undefined, { granularity: "grapheme" });

/**
 * Where the graphemes of the text last asked about start: splitting a text cuts it many times
 * (every space of a long link is tried), and segmenting it whole at every cut was quadratic.
 */
let segmented: { text: string; starts: number[] } | null = null;

/** The start of every grapheme of `text`, in order. */
function graphemeStarts(text: string): number[] {
  if (segmented?.text !== text) {
    segmented = { text, starts: Array.from(GRAPHEMES.segment(text), (one) => one.index) };
  }
  return segmented.starts;
}

/**
 * The index at most `cut` where plain text can be cut without splitting a grapheme (a flag, a
 * family emoji, a letter and its accents), or where one grapheme is longer than `cut` (a run of
 * combining marks), without splitting a surrogate pair.
 */
function plainCut(text: string, cut: number): number {
  if (cut <= 0 || cut >= text.length) return cut;
  const next = text.charCodeAt(cut);
  // An ASCII character starts a grapheme (but a line feed after a carriage return).
  if (next < 0x80 && !(next === 0x0a && text.charCodeAt(cut - 1) === 0x0d)) return cut;
  const starts = graphemeStarts(text);
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if (starts[middle] <= cut) low = middle;
    else high = middle - 1;
  }
  if (starts[low] > 0) return starts[low];
  return next >= 0xdc00 && next <= 0xdfff ? cut - 1 : cut;
}

/**
 * Plain text cut to at most `max` characters, ending in "…" if it was cut (for `plain_text`
 * fields such as button labels). The cut never splits a grapheme.
 */
export function truncatePlain(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, plainCut(text, max - 1)).trimEnd()}…`;
}

/**
 * Mrkdwn cut to at most `max` characters, ending in "…" if it was cut. The cut never splits a
 * grapheme, an entity or a link, so the result is still valid mrkdwn.
 */
export function truncateMrkdwn(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, safeCut(text, max - 1) || max - 1).trimEnd()}…`;
}
