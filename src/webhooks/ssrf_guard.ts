/**
 * The SSRF guard for webhook urls (CONTRACT §5.3): a webhook url must be `https` and every
 * address its host resolves to must be globally routable unicast, so that a tenant cannot make
 * the server call its own network (loopback, RFC 1918, link-local cloud metadata, ...). The
 * decision is made on the addresses the resolver returns, never on the url text, because a
 * host can be written in many notations (decimal, octal, hex, IPv4-mapped IPv6, ...) and a name
 * can point anywhere; the checked addresses are handed back so that the delivery connects to one
 * of them instead of resolving again (which would reopen the door to DNS rebinding). Addresses
 * are classified by ipaddr.js with the contract's ranges added on top, so either list blocking
 * an address is enough. `WEBHOOK_ALLOW_PRIVATE_HOSTS` (parsed by `parseAllowList`, allow_list.ts)
 * exempts named hosts or ranges, for local testing only.
 */
import { canonical, isBlockedParsed, parseStrict } from "./address_policy.ts";
import { type AllowList, isAllowedAddress } from "./allow_list.ts";

/**
 * Resolves a host name to IP address strings (IPv4 and IPv6). Rejects, or returns `[]`, when the
 * name does not resolve.
 */
export type Resolver = (hostname: string) => Promise<string[]>;

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
   * This machine's own addresses (`machineAddresses`, address_policy.ts), refused even when public: a
   * connection to them reaches services that an outside firewall keeps from the world, and the
   * outcome of each attempt (refused, timeout, TLS) is shown to the tenant. @default none
   */
  own?: readonly string[];
} /** The message every refusal carries; the caller answers it with a 400. */
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

const NO_ADDRESSES: readonly string[] = [];

/**
 * The canonical forms of each list of own addresses, kept while the list is in use: a delivery
 * checks its url each time, and parsing the machine's addresses anew for each one (its IPv6
 * addresses above all) cost 0.1 ms a check — a third of a delivery thread's CPU at saturation.
 * `machineAddresses()` hands out the same frozen list until it lists them again.
 */
const canonicalOwn = new WeakMap<readonly string[], ReadonlySet<string | null>>();

function ownAddresses(own: readonly string[]): ReadonlySet<string | null> {
  let canonicalForms = canonicalOwn.get(own);
  if (canonicalForms === undefined) {
    canonicalForms = new Set(own.map(canonical));
    // A list that may still change is not kept.
    if (Object.isFrozen(own)) canonicalOwn.set(own, canonicalForms);
  }
  return canonicalForms;
}

/**
 * Checks a webhook url against CONTRACT §5.3 and returns it with the addresses the delivery may
 * connect to. An IP literal (in any notation the URL parser accepts) is checked directly; a name
 * goes to `options.resolve` and is refused if it resolves to nothing or to any blocked address.
 * Any port but 0 is allowed; this machine's own addresses (`options.own`) are refused like private ones.
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

  // Port 0 names no service: nothing could ever be delivered there.
  if (url.port === "0") throw new UnsafeUrlError("port 0");
  const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "");
  if (hostname === "") throw new UnsafeUrlError("no host");
  const found = await addressesOf(hostname, options.resolve);
  if (found.length === 0) throw new UnsafeUrlError("does not resolve");

  const allow = options.allow ?? { names: [], cidrs: [] };
  const exemptName = allow.names.includes(hostname);
  const own = ownAddresses(options.own ?? NO_ADDRESSES);
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
