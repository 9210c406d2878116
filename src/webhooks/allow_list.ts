/**
 * `WEBHOOK_ALLOW_PRIVATE_HOSTS`: host names and ranges exempt from the webhook address check, for
 * local testing only.
 */
import ipaddr from "ipaddr.js";
import { type Address, parseStrict } from "./address_policy.ts";

/** Exemptions from the address check (`WEBHOOK_ALLOW_PRIVATE_HOSTS`); for local testing only. */
export interface AllowList {
  /** Host names whose addresses are not checked: lower case, without a trailing dot. */
  readonly names: readonly string[];
  /** Ranges whose addresses are not checked, in canonical CIDR notation (e.g. `10.0.0.0/8`). */
  readonly cidrs: readonly string[];
}

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
export function isAllowedAddress(address: Address, allow: AllowList): boolean {
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
