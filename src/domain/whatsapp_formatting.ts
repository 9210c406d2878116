/**
 * Text shaping for WhatsApp: the Cloud API's documented length limits ({@linkcode LIMITS}), text
 * fitted into them — split into several pieces at line or word boundaries, or cut visibly with
 * "…" — and Markdown rewritten into WhatsApp's own formatting (`*bold*`, `_italic_`, `~strike~`,
 * ``` blocks). Lengths are counted in UTF-16 code units (`String.length`), never fewer than the
 * characters Meta counts, so a piece that fits here fits there however an emoji is counted; cuts
 * fall between graphemes so no emoji or accent is torn apart. Pure: no I/O.
 */
import { literalMarkers } from "./literal_markers.ts";

/**
 * Limits of the Cloud API, from Meta's developer documentation: the request parameters of
 * developers.facebook.com/documentation/business-messaging/whatsapp/messages/<page> (updated Nov
 * 2025). Meta counts characters; we count UTF-16 code units, never fewer (see above).
 */
export const LIMITS = {
  /** text-messages: body "Maximum 4096 characters". */
  textBody: 4096,
  /** image-messages, document-messages: caption "Maximum 1024 characters". */
  caption: 1024,
  /** interactive-reply-buttons-messages: "up to 3 buttons"; body 1024; label 20, "unique"; id 256. */
  replyButtons: 3,
  replyBody: 1024,
  replyTitle: 20,
  replyId: 256,
  /**
   * interactive-list-messages: "up to 10 rows for all sections combined"; body 4096; button label
   * 20; section title (required) 24; row title 24, description 72, id 200.
   */
  listRows: 10,
  listBody: 4096,
  listButton: 20,
  sectionTitle: 24,
  rowTitle: 24,
  rowDescription: 72,
  rowId: 200,
} as const;

/** Marks a cut title. */
const ELLIPSIS = "…";
/** WhatsApp's monospace fence, for blocks and multi-line code. */
const FENCE = "```";
/** Splits text into user-perceived characters. */
const GRAPHEMES = new Intl.Segmenter(undefined, { granularity: "grapheme" });

/** Options for {@linkcode splitText}. */
export interface SplitTextOptions {
  /**
   * Limit for the first piece only (e.g. a media caption followed by text messages).
   * @default the `max` argument
   */
  firstMax?: number;
}

/** The longest prefix of `text` of at most `max` code units that ends between two graphemes. */
function graphemePrefix(text: string, max: number): string {
  let end = 0;
  for (const { index, segment } of GRAPHEMES.segment(text)) {
    if (index + segment.length > max) break;
    end = index + segment.length;
  }
  // A single grapheme longer than `max` (a long run of combining marks): cut between code points.
  if (end === 0) {
    for (const codePoint of text) {
      if (end + codePoint.length > max) break;
      end += codePoint.length;
    }
  }
  return text.slice(0, end);
}

/** The start of the shortest suffix of `text` of at most `max` code units that begins between two graphemes. */
function graphemeSuffixStart(text: string, max: number): number {
  const earliest = text.length - max;
  for (const { index } of GRAPHEMES.segment(text)) {
    if (index >= earliest) return index;
  }
  return text.length;
}

/** Drops the line breaks a cut leaves at the start of a piece and the blanks at its end. */
function tidy(piece: string): string {
  return piece.replace(/^[\r\n]+/, "").trimEnd();
}

/** The index of the last whitespace character of `text` after index 0, or -1. */
function lastSpace(text: string): number {
  for (let index = text.length - 1; index > 0; index--) {
    if (/\s/.test(text[index])) return index;
  }
  return -1;
}

/**
 * Where to cut `text`, longer than `max`, so that the head fits: the end of the head and the start
 * of the rest. Prefers a line break in the second half of the allowed span (so pieces stay long),
 * then the last space, then any line break, then the last grapheme boundary; the line break or
 * space cut on is dropped.
 */
function cutPoint(text: string, max: number): [number, number] {
  const span = text.slice(0, max + 1);
  const newline = span.lastIndexOf("\n");
  if (newline >= max / 2) return [newline, newline + 1];
  const space = lastSpace(span);
  const boundary = Math.max(newline, space);
  if (boundary > 0) return [boundary, boundary + 1];
  const end = graphemePrefix(text, max).length;
  return [end, end];
}

/** How many WhatsApp fences `text` holds. */
function fenceCount(text: string): number {
  return text.split(FENCE).length - 1;
}

/**
 * Splits `text` into pieces of at most `max` code units (the first at most `firstMax`), cutting at
 * line breaks, else spaces, else between graphemes. The line break or space cut on is dropped, and
 * so are blank pieces: a blank text gives no piece. A ``` block cut in two is closed at the end of
 * one piece and reopened at the start of the next, so its formatting survives the cut.
 */
export function splitText(text: string, max: number, options: SplitTextOptions = {}): string[] {
  const closing = text.includes(FENCE) ? `\n${FENCE}`.length : 0;
  const pieces: string[] = [];
  let rest = text;
  let reopen = "";
  while (/\S/.test(rest)) {
    const limit = pieces.length === 0 ? options.firstMax ?? max : max;
    let head = rest;
    rest = "";
    if (reopen.length + head.length > limit) {
      const [end, start] = cutPoint(head, limit - reopen.length - closing);
      rest = head.slice(start);
      head = head.slice(0, end);
    }
    let piece = reopen + tidy(head);
    reopen = "";
    if (rest !== "" && fenceCount(piece) % 2 === 1) {
      piece += `\n${FENCE}`;
      reopen = `${FENCE}\n`;
    }
    if (/\S/.test(piece)) pieces.push(piece);
  }
  return pieces;
}

/**
 * Splits `text` so that its end fits in `max` code units: `tail` is the longest end that starts
 * after a line break (preferred while it keeps at least half of `max`) or a space, or else between
 * graphemes; `head` is what comes before (empty when the whole text fits). For a text followed by
 * buttons: the head goes first as text messages, the tail next to the buttons.
 */
export function splitTail(text: string, max: number): { head: string; tail: string } {
  const whole = tidy(text);
  if (whole.length <= max) return { head: "", tail: whole };
  const from = whole.length - max - 1;
  const span = whole.slice(from);
  const newline = span.indexOf("\n");
  const space = span.search(/\s/);
  let cut: [number, number];
  if (newline !== -1 && newline <= max / 2) cut = [from + newline, from + newline + 1];
  else if (space !== -1) cut = [from + space, from + space + 1];
  else {
    const start = graphemeSuffixStart(whole, max);
    cut = [start, start];
  }
  return { head: tidy(whole.slice(0, cut[0])), tail: tidy(whole.slice(cut[1])) };
}

/** `text` cut to at most `max` code units, ending in "…" when anything was cut. */
export function truncateText(text: string, max: number): string {
  if (text.length <= max) return text;
  return graphemePrefix(text, max - ELLIPSIS.length).trimEnd() + ELLIPSIS;
}

/** A title on one line, as WhatsApp shows titles. */
export function oneLine(title: string): string {
  return title.replace(/\s+/g, " ").trim();
}

/** `text`, then a `• Title` line for each title that a button or row could not show in full. */
export function withFullTitles(text: string, titles: string[]): string {
  return titles.length === 0
    ? text
    : `${text}\n\n${titles.map((title) => `• ${title}`).join("\n")}`;
}

/**
 * Titles cut to `max` code units each and made unique (as reply-button labels must be) by a
 * ` (2)`, ` (3)`… suffix on a repeat.
 */
export function uniqueTitles(titles: string[], max: number): string[] {
  const seen = new Set<string>();
  return titles.map((title) => {
    let unique = truncateText(title, max);
    for (let n = 2; seen.has(unique); n++) {
      const suffix = ` (${n})`;
      unique = truncateText(title, max - suffix.length) + suffix;
    }
    seen.add(unique);
    return unique;
  });
}

/** After a closing underscore run, no letter or digit: it would close inside a word. */
const AFTER_CLOSE = String.raw`(?:(?<=\*)|(?![A-Za-z0-9]))`;

/**
 * `text` set in WhatsApp bold. Its own asterisks become look-alikes (∗, U+2217), which format
 * nothing: one would end the bold early (`*5* Hotel*`).
 */
export function boldText(text: string): string {
  return `*${text.replaceAll("*", "\u2217")}*`;
}

/**
 * Markdown inline constructs, tried left to right; the first alternative that matches wins.
 * Underscore emphasis counts only outside words (`my__var__name` stays as it is), as in
 * CommonMark.
 */
const INLINE = new RegExp(
  [
    String.raw`\\(?<escaped>[!-/:-@[-\x60{-~])`,
    String.raw`(?<code>(?<ticks>\x60+)[\s\S]+?\k<ticks>(?!\x60))`,
    // A destination may hold balanced parentheses, one level deep (`…/Mercury_(planet)`).
    String
      .raw`!?\[(?<label>[^\]]*)\]\(\s*<?(?<href>(?:[^\s()<>]|\([^\s()<>]*\))+)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`,
    String.raw`<(?<autolink>https?:\/\/[^\s<>]+)>`,
    String.raw`(?<url>https?:\/\/[^\s<>]*[^\s<>.,;:!?)\]'"])`,
    String
      .raw`(?<d3>\*\*\*|(?<![A-Za-z0-9])___)(?=\S)(?<strongEm>[\s\S]*?\S)\k<d3>${AFTER_CLOSE}`,
    String
      .raw`(?<d2>\*\*|(?<![A-Za-z0-9])__)(?=\S)(?<strong>[\s\S]*?\S)\k<d2>${AFTER_CLOSE}`,
    // Not closed by the first star of a `**` inside it (`*Note: **this** now*`).
    String
      .raw`(?<d1>\*|(?<![A-Za-z0-9])_)(?=[^\s*])(?<em>[\s\S]*?[^\s*])\k<d1>(?!\*)${AFTER_CLOSE}`,
    String.raw`~~(?=\S)(?<strike>[\s\S]*?\S)~~`,
  ].join("|"),
  "g",
);

/** One line of Markdown inline syntax in WhatsApp formatting; code and URLs are left as they are. */
function formatInline(text: string): string {
  return text.replace(INLINE, (match, ...args) => {
    const groups = args.at(-1) as Record<string, string | undefined>;
    // An escaped WhatsApp marker is its look-alike: WhatsApp has no escape, and alone it could
    // start formatting.
    if (groups.escaped !== undefined) return literalMarkers(groups.escaped);
    if (groups.code !== undefined || groups.url !== undefined) return match;
    if (groups.autolink !== undefined) return groups.autolink;
    if (groups.href !== undefined) {
      const label = formatInline(groups.label ?? "").trim();
      return label === "" || label === groups.href ? groups.href : `${label} (${groups.href})`;
    }
    if (groups.strongEm !== undefined) return `*_${formatInline(groups.strongEm)}_*`;
    if (groups.strong !== undefined) return `*${formatInline(groups.strong)}*`;
    if (groups.em !== undefined) return `_${formatInline(groups.em)}_`;
    return `~${formatInline(groups.strike ?? "")}~`;
  });
}

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const HEADING = /^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/;
const BULLET = /^([ \t]*)[-*+][ \t]+(.*)$/;
const ORDERED = /^([ \t]*)(\d{1,9})[.)][ \t]+(.*)$/;
const QUOTE = /^ {0,3}>[ \t]?(.*)$/;

/** One line of Markdown outside code blocks in WhatsApp formatting. */
function formatLine(line: string): string {
  if (RULE.test(line)) return "———";
  const heading = HEADING.exec(line);
  // A heading is one bold line; bold inside it would close the outer bold early.
  if (heading) {
    const text = formatInline(heading[1].replace(/(\*\*|__)(.+?)\1/g, "$2"));
    // An empty heading is an empty line: `**` would show as two asterisks.
    return text.trim() === "" ? "" : `*${text}*`;
  }
  const bullet = BULLET.exec(line);
  if (bullet) return `${bullet[1]}• ${formatInline(bullet[2])}`;
  const ordered = ORDERED.exec(line);
  if (ordered) return `${ordered[1]}${ordered[2]}. ${formatInline(ordered[3])}`;
  const quote = QUOTE.exec(line);
  if (quote) return `> ${formatInline(quote[1])}`;
  return formatInline(line);
}

/**
 * Markdown in WhatsApp's formatting: `**bold**` → `*bold*`, `*italic*` and `_italic_` →
 * `_italic_`, `***both***` → `*_both_*`, `~~strike~~` → `~strike~`, fenced code → a ``` block
 * (its language tag dropped), inline `code` and bare URLs kept as they are, `[text](url)` and
 * `![alt](url)` → `text (url)`, headings → bold lines, `-`/`*`/`+` items → `•` lines, numbered
 * items → `1.` lines, quotes → `> ` lines, rules → a dash line, backslash escapes → the
 * character (WhatsApp's own markers `*_~` and backtick → their look-alikes, which format nothing).
 */
export function toWhatsAppFormatting(markdown: string): string {
  const lines: string[] = [];
  let fence: string | null = null;
  for (const line of markdown.split(/\r?\n/)) {
    if (fence !== null) {
      const marker = line.trim();
      const closes = marker.length >= fence.length && marker === fence[0].repeat(marker.length);
      lines.push(closes ? FENCE : line);
      if (closes) fence = null;
      continue;
    }
    const open = FENCE_OPEN.exec(line);
    if (open) {
      fence = open[1];
      lines.push(FENCE);
      continue;
    }
    lines.push(formatLine(line));
  }
  if (fence !== null) lines.push(FENCE);
  return lines.join("\n");
}
