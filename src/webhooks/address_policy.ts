/**
 * Which IP addresses a webhook may reach (CONTRACT §5.3): globally routable unicast only, read in
 * one strict notation so that no consumer can read an address differently from the check.
 * Addresses are classified by ipaddr.js with the contract's ranges added on top, so either list
 * blocking an address is enough.
 */
import ipaddr from "ipaddr.js";

/** A parsed IPv4 or IPv6 address. */
export type Address = ipaddr.IPv4 | ipaddr.IPv6;

let listed: { addresses: readonly string[]; at: number } | null = null;

/**
 * The addresses of this machine's network interfaces (none where they cannot be listed), listed
 * again at most every 10 s: every delivery attempt checks them.
 */
export function machineAddresses(): readonly string[] {
  const now = performance.now();
  if (listed && now - listed.at < 10_000) return listed.addresses;
  let addresses: string[] = [];
  try {
    addresses = Deno.networkInterfaces().map((face) => face.address);
  } catch {
    // Not allowed to list them: only the configured ranges apply.
  }
  // Frozen: the SSRF guard keeps its canonical forms while the same list comes back.
  listed = { addresses: Object.freeze(addresses), at: now };
  return listed.addresses;
}

/** `address` in canonical form, IPv4-mapped IPv6 as IPv4; null when it is no IP address. */
export function canonical(text: string): string | null {
  const address = parseStrict(text);
  if (address === null) return null;
  if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress()) {
    return (address as ipaddr.IPv6).toIPv4Address().toString();
  }
  return address.toString();
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
export function parseStrict(text: string): Address | null {
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

/**
 * The ranges of ipaddr.js that IANA's special-purpose registries call globally reachable
 * unicast: AS112's DNS sinks and AMT relays (anycast, which is unicast to a sender). The IPv6
 * ones inside `2001::/23` stay blocked with it, as the contract lists it.
 */
const GLOBALLY_REACHABLE = new Set(["unicast", "as112", "amt", "as112v6"]);

/** Whether a parsed address must be refused (see {@linkcode isBlockedAddress}). */
export function isBlockedParsed(address: Address): boolean {
  if (address.kind() === "ipv4") {
    const v4 = address as ipaddr.IPv4;
    return !GLOBALLY_REACHABLE.has(v4.range()) || BLOCKED_V4.some((range) => v4.match(range));
  }
  const v6 = address as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return isBlockedParsed(v6.toIPv4Address());
  return !GLOBALLY_REACHABLE.has(v6.range()) || !v6.match(GLOBAL_UNICAST_V6) ||
    BLOCKED_V6.some((range) => v6.match(range));
}

/**
 * Whether a connection to `address` must be refused: true for every range of CONTRACT §5.3 (and
 * whatever else ipaddr.js calls neither unicast nor AS112 or AMT), for an IPv4-mapped IPv6
 * address whose IPv4 is blocked, and for anything that is not an IP address in canonical notation
 * (including an IPv6 address with a zone id).
 */
export function isBlockedAddress(address: string): boolean {
  const parsed = parseStrict(address);
  return parsed === null || isBlockedParsed(parsed);
}
