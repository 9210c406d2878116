/**
 * The SSRF guard for webhook urls (CONTRACT §5.3): a webhook url must be `https` and every
 * address its host resolves to must be globally routable unicast, so that a tenant cannot make
 * the server call its own network (loopback, RFC 1918, link-local cloud metadata, ...). The
 * decision is made on the addresses the resolver returns, never on the url text, because a
 * host can be written in many notations (decimal, octal, hex, IPv4-mapped IPv6, ...) and a name
 * can point anywhere; the checked addresses are handed back so that the delivery connects to one
 * of them instead of resolving again (which would reopen the door to DNS rebinding). Addresses
 * are classified by ipaddr.js with the contract's ranges added on top, so either list blocking
 * an address is enough. `WEBHOOK_ALLOW_PRIVATE_HOSTS` (parsed by {@linkcode parseAllowList})
 * exempts named hosts or ranges, for local testing only.
 */
import ipaddr from "ipaddr.js";

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/**
 * Resolves a host name to IP address strings (IPv4 and IPv6). Rejects, or returns `[]`, when the
 * name does not resolve.
 */
export type Resolver = (hostname: string) => Promise<string[]>;

/** Exemptions from the address check (`WEBHOOK_ALLOW_PRIVATE_HOSTS`); for local testing only. */
export interface AllowList {
  /** Host names whose addresses are not checked: lower case, without a trailing dot. */
  readonly names: readonly string[];
  /** Ranges whose addresses are not checked, in canonical CIDR notation (e.g. `10.0.0.0/8`). */
  readonly cidrs: readonly string[];
}

/** A webhook url that passed the guard, with the addresses the delivery may connect to. */
export interface CheckedUrl {
  /** The parsed url. */
  url: URL;
  /** The url's host: lower case, without brackets or a trailing dot. */
  hostname: string;
  /**
   * The resolved (or literal) addresses, canonical and without duplicates; the delivery connects
   * to one of these and never resolves the name again.
   */
  addresses: string[];
}

/** Options of {@linkcode checkWebhookUrl}. */
export interface CheckWebhookUrlOptions {
  /** Resolves host names; {@linkcode systemResolver} in production, a fake in tests. */
  resolve: Resolver;
  /** Hosts and ranges exempt from the address check. @default none */
  allow?: AllowList;
  /**
   * This machine's own addresses ({@linkcode machineAddresses}), refused even when public: a
   * connection to them reaches services that an outside firewall keeps from the world, and the
   * outcome of each attempt (refused, timeout, TLS) is shown to the tenant. @default none
   */
  own?: readonly string[];
}

let listed: { addresses: string[]; at: number } | null = null;

/**
 * The addresses of this machine's network interfaces (none where they cannot be listed), listed
 * again at most every 10 s: every delivery attempt checks them.
 */
export function machineAddresses(): string[] {
  const now = performance.now();
  if (listed && now - listed.at < 10_000) return listed.addresses;
  let addresses: string[] = [];
  try {
    addresses = Deno.networkInterfaces().map((face) => face.address);
  } catch {
    // Not allowed to list them: only the configured ranges apply.
  }
  listed = { addresses, at: now };
  return addresses;
}

/** `address` in canonical form, IPv4-mapped IPv6 as IPv4; null when it is no IP address. */
function canonical(text: string): string | null {
  const address = parseStrict(text);
  if (address === null) return null;
  if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress()) {
    return (address as ipaddr.IPv6).toIPv4Address().toString();
  }
  return address.toString();
}

/** The message every refusal carries; the caller answers it with a 400. */
const UNSAFE_URL_MESSAGE = "url must be an https URL that resolves to a public address";

/**
 * A webhook url the guard refuses. The message is the same for every cause, so that a caller
 * cannot use it to probe the network; `reason` says the cause, for logs only.
 */
export class UnsafeUrlError extends Error {
  /** Why the url was refused (e.g. `not https`, `blocked address 10.0.0.1`); never shown. */
  readonly reason: string;

  constructor(reason: string) {
    super(UNSAFE_URL_MESSAGE);
    this.name = "UnsafeUrlError";
    this.reason = reason;
  }
}

/**
 * The contract's IPv4 ranges. ipaddr.js already calls all of them non-unicast; they are listed
 * again so that the contract holds even if a release of the classifier moves one.
 */
const BLOCKED_V4 = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.0.2.0/24",
  "192.88.99.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "224.0.0.0/4",
  "240.0.0.0/4",
  "255.255.255.255/32",
].map((cidr) => ipaddr.IPv4.parseCIDR(cidr));

/**
 * The contract's IPv6 ranges (`::ffff:0:0/96` is not here: it is checked as its IPv4). `::/96`
 * (IPv4-compatible) is one ipaddr.js calls unicast.
 */
const BLOCKED_V6 = [
  "::/128",
  "::1/128",
  "::/96",
  "64:ff9b::/96",
  "64:ff9b:1::/48",
  "100::/64",
  "2001::/23",
  "2001:db8::/32",
  "2002::/16",
  "3fff::/20",
  "fc00::/7",
  "fe80::/10",
  "fec0::/10",
  "ff00::/8",
].map((cidr) => ipaddr.IPv6.parseCIDR(cidr));

/**
 * The only IPv6 space IANA allocates for global unicast; ipaddr.js calls the reserved rest
 * (`4000::/2`, `e000::/4`, `1::/16`…) "unicast" too.
 */
const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR("2000::/3");

/**
 * Parses an address only in a notation every consumer reads the same way: dotted decimal IPv4
 * without leading zeros, or IPv6 without a zone id (an embedded IPv4 part dotted decimal too).
 * ipaddr.js alone also reads `0177.0.0.1` or `127.1`, reads a `0177` embedded in IPv6 as
 * decimal, and turns the IPv4-compatible `::8.8.8.8` into the mapped `::ffff:8.8.8.8`; a
 * connector that read such a string differently would reach an unchecked address. So the
 * embedded IPv4 part is rewritten as two hex groups here, and ipaddr.js sees plain IPv6.
 */
function parseStrict(text: string): Address | null {
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) return ipaddr.IPv4.parse(text);
  if (text.includes("%")) return null;
  const tail = text.slice(text.lastIndexOf(":") + 1);
  let hex = text;
  if (tail.includes(".")) {
    if (!ipaddr.IPv4.isValidFourPartDecimal(tail)) return null;
    const [a, b, c, d] = ipaddr.IPv4.parse(tail).octets;
    const groups = `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
    hex = text.slice(0, text.length - tail.length) + groups;
  }
  return ipaddr.IPv6.isValid(hex) ? ipaddr.IPv6.parse(hex) : null;
}

function isBlockedParsed(address: Address): boolean {
  if (address.kind() === "ipv4") {
    const v4 = address as ipaddr.IPv4;
    return v4.range() !== "unicast" || BLOCKED_V4.some((range) => v4.match(range));
  }
  const v6 = address as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return isBlockedParsed(v6.toIPv4Address());
  return v6.range() !== "unicast" || !v6.match(GLOBAL_UNICAST_V6) ||
    BLOCKED_V6.some((range) => v6.match(range));
}

/**
 * Whether a connection to `address` must be refused: true for every range of CONTRACT §5.3 (and
 * whatever else ipaddr.js calls non-unicast), for an IPv4-mapped IPv6 address whose IPv4 is
 * blocked, and for anything that is not an IP address in canonical notation (including an IPv6
 * address with a zone id).
 */
export function isBlockedAddress(address: string): boolean {
  const parsed = parseStrict(address);
  return parsed === null || isBlockedParsed(parsed);
}

/** Resolves A and AAAA records together; a name with only one family still resolves. */
async function resolveWithSystemDns(hostname: string): Promise<string[]> {
  const answers = await Promise.allSettled([
    Deno.resolveDns(hostname, "A"),
    Deno.resolveDns(hostname, "AAAA"),
  ]);
  return answers.flatMap((answer) => answer.status === "fulfilled" ? answer.value : []);
}

/**
 * The production {@linkcode Resolver}: `Deno.resolveDns` for A and AAAA records (needs
 * `--allow-net`); `[]` when neither resolves.
 */
export const systemResolver: Resolver = resolveWithSystemDns;

/** A label of a host name; the last one may not look like a number, or URLs would read IPv4. */
const LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;
const NUMERIC_LABEL = /^(\d+|0x[0-9a-f]*)$/;

function isHostName(name: string): boolean {
  const labels = name.split(".");
  return name.length <= 253 && labels.every((label) => LABEL.test(label)) &&
    !NUMERIC_LABEL.test(labels[labels.length - 1]);
}

function parseCidr(entry: string): string | null {
  const [text, bits, ...rest] = entry.split("/");
  const address = parseStrict(text);
  if (address === null || rest.length > 0 || !/^\d{1,3}$/.test(bits)) return null;
  const prefix = Number(bits);
  if (prefix > (address.kind() === "ipv4" ? 32 : 128)) return null;
  return `${address.toString()}/${prefix}`;
}

/**
 * Parses `WEBHOOK_ALLOW_PRIVATE_HOSTS`: a comma list of host names (matched case-insensitively,
 * a trailing dot ignored) and CIDRs (IPv4 or IPv6, e.g. `127.0.0.1/32`, `::1/128`; a bare
 * address counts as a single-address range). Blank entries are skipped; unset means none.
 * @throws {RangeError} naming the first entry that is neither a host name nor a CIDR.
 */
export function parseAllowList(text: string | null | undefined): AllowList {
  const names = new Set<string>();
  const cidrs = new Set<string>();
  for (const raw of (text ?? "").split(",")) {
    const entry = raw.trim();
    if (entry === "") continue;
    const unbracketed = /^\[.*\]$/.test(entry) ? entry.slice(1, -1) : entry;
    const address = parseStrict(unbracketed);
    if (address !== null) {
      cidrs.add(`${address.toString()}/${address.kind() === "ipv4" ? 32 : 128}`);
      continue;
    }
    if (entry.includes("/")) {
      const cidr = parseCidr(entry);
      if (cidr === null) throw new RangeError(`Invalid allow-list entry "${entry}": not a CIDR`);
      cidrs.add(cidr);
      continue;
    }
    const name = entry.toLowerCase().replace(/\.$/, "");
    if (!isHostName(name)) {
      throw new RangeError(`Invalid allow-list entry "${entry}": not a host name or CIDR`);
    }
    names.add(name);
  }
  return { names: [...names], cidrs: [...cidrs] };
}

/** Whether a CIDR of `allow` contains `address` (or, for IPv4-mapped IPv6, its IPv4). */
function isAllowedAddress(address: Address, allow: AllowList): boolean {
  const forms: Address[] = [address];
  if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress()) {
    forms.push((address as ipaddr.IPv6).toIPv4Address());
  }
  return allow.cidrs.some((cidr) => {
    const range = parsedCidr(cidr);
    return range !== null &&
      forms.some((form) => form.kind() === range[0].kind() && form.match(range));
  });
}

/** Allow-list CIDRs as parsed once: every attempt checks them. */
const PARSED_CIDRS = new Map<string, [Address, number] | null>();

/** A parsed CIDR; null for one that does not parse (a hand-built list may hold anything). */
function parsedCidr(cidr: string): [Address, number] | null {
  let range = PARSED_CIDRS.get(cidr);
  if (range === undefined) {
    range = ipaddr.isValidCIDR(cidr) ? ipaddr.parseCIDR(cidr) : null;
    if (PARSED_CIDRS.size < 1_000) PARSED_CIDRS.set(cidr, range);
  }
  return range;
}

/** The authority as the raw text has it, where an `@` means userinfo even if it is empty. */
function rawAuthority(text: string): string {
  return /^[^:]*:[/\\]*([^/\\?#]*)/.exec(text)?.[1] ?? "";
}

/** The addresses `hostname` stands for: itself if it is an IP literal, else what it resolves to. */
async function addressesOf(hostname: string, resolve: Resolver): Promise<string[]> {
  if (parseStrict(hostname) !== null) return [hostname];
  try {
    const addresses = await resolve(hostname);
    return Array.isArray(addresses) ? addresses : [];
  } catch {
    return [];
  }
}

/**
 * Checks a webhook url against CONTRACT §5.3 and returns it with the addresses the delivery may
 * connect to. An IP literal (in any notation the URL parser accepts) is checked directly; a name
 * goes to `options.resolve` and is refused if it resolves to nothing or to any blocked address.
 * Any port is allowed; this machine's own addresses (`options.own`) are refused like private ones.
 * @throws {UnsafeUrlError} `url must be an https URL that resolves to a public address`, with
 * the cause in `reason`.
 */
export async function checkWebhookUrl(
  text: string,
  options: CheckWebhookUrlOptions,
): Promise<CheckedUrl> {
  // The URL parser silently drops tabs and newlines, so they are looked for in the raw text.
  if (/[\p{Cc}\p{Cf}\p{Z}\s]/u.test(text)) {
    throw new UnsafeUrlError("control characters or whitespace");
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UnsafeUrlError("unparseable");
  }
  if (url.protocol !== "https:") throw new UnsafeUrlError("not https");
  if (url.username !== "" || url.password !== "" || rawAuthority(text).includes("@")) {
    throw new UnsafeUrlError("userinfo");
  }
  // An empty fragment (`https://host/#`) leaves `url.hash` empty, hence the raw text.
  if (text.includes("#") || url.hash !== "") throw new UnsafeUrlError("fragment");

  const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "");
  if (hostname === "") throw new UnsafeUrlError("no host");
  const found = await addressesOf(hostname, options.resolve);
  if (found.length === 0) throw new UnsafeUrlError("does not resolve");

  const allow = options.allow ?? { names: [], cidrs: [] };
  const exemptName = allow.names.includes(hostname);
  const own = new Set((options.own ?? []).map(canonical));
  const addresses = new Set<string>();
  for (const raw of found) {
    const address = parseStrict(String(raw));
    if (address === null) throw new UnsafeUrlError(`not an IP address ${JSON.stringify(raw)}`);
    const blocked = isBlockedParsed(address) || own.has(canonical(address.toString()));
    if (!exemptName && blocked && !isAllowedAddress(address, allow)) {
      throw new UnsafeUrlError(`blocked address ${address.toString()}`);
    }
    addresses.add(address.toString());
  }
  return { url, hostname, addresses: [...addresses] };
}
