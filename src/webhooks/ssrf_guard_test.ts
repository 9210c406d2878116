import assert from "node:assert/strict";
import { checkWebhookUrl, type Resolver, UnsafeUrlError } from "./ssrf_guard.ts";
import { isBlockedAddress, machineAddresses } from "./address_policy.ts";
import { type AllowList, parseAllowList } from "./allow_list.ts";

const MESSAGE = "url must be an https URL that resolves to a public address";

/** A resolver answering from a Map, rejecting unknown names like NXDOMAIN; records its calls. */
function fakeResolver(records: [string, string[]][] = []): { resolve: Resolver; calls: string[] } {
  const table = new Map(records);
  const calls: string[] = [];
  const resolve: Resolver = (hostname) => {
    calls.push(hostname);
    const addresses = table.get(hostname);
    return addresses === undefined
      ? Promise.reject(new Error(`NXDOMAIN ${hostname}`))
      : Promise.resolve(addresses);
  };
  return { resolve, calls };
}

/** The `reason` of the UnsafeUrlError `checkWebhookUrl` rejects with; fails if it accepts. */
async function reasonOf(
  text: string,
  options: { resolve: Resolver; allow?: AllowList; own?: string[] },
): Promise<string> {
  try {
    const checked = await checkWebhookUrl(text, options);
    assert.fail(`${JSON.stringify(text)} was accepted as ${checked.addresses.join(", ")}`);
  } catch (error) {
    assert.ok(error instanceof UnsafeUrlError, `${JSON.stringify(text)}: ${error}`);
    assert.equal(error.message, MESSAGE);
    return error.reason;
  }
}

// [address, blocked], one or more inside each contract range and, at the edges, just outside.
const V4_CASES: [string, boolean][] = [
  ["0.0.0.0", true],
  ["0.255.255.255", true],
  ["1.0.0.1", false],
  ["9.255.255.255", false],
  ["10.0.0.0", true],
  ["10.255.255.255", true],
  ["11.0.0.0", false],
  ["100.63.255.255", false],
  ["100.64.0.0", true],
  ["100.127.255.255", true],
  ["100.128.0.0", false],
  ["126.255.255.255", false],
  ["127.0.0.1", true],
  ["127.255.255.254", true],
  ["128.0.0.1", false],
  ["169.253.255.255", false],
  ["169.254.0.0", true],
  ["169.254.169.254", true],
  ["169.255.0.0", false],
  ["172.15.255.255", false],
  ["172.16.0.0", true],
  ["172.31.255.255", true],
  ["172.32.0.0", false],
  ["192.0.0.8", true],
  ["192.0.1.1", false],
  ["192.0.2.1", true],
  ["192.0.3.0", false],
  ["192.88.98.255", false],
  ["192.88.99.1", true],
  ["192.88.100.0", false],
  ["192.167.255.255", false],
  ["192.168.0.0", true],
  ["192.168.255.255", true],
  ["192.169.0.0", false],
  ["198.17.255.255", false],
  ["198.18.0.0", true],
  ["198.19.255.255", true],
  ["198.20.0.0", false],
  ["198.51.99.255", false],
  ["198.51.100.7", true],
  ["198.51.101.0", false],
  ["203.0.112.255", false],
  ["203.0.113.9", true],
  ["203.0.114.0", false],
  ["223.255.255.255", false],
  ["224.0.0.1", true],
  ["239.255.255.255", true],
  ["240.0.0.1", true],
  ["255.255.255.254", true],
  ["255.255.255.255", true],
];

const V6_CASES: [string, boolean][] = [
  ["::", true],
  ["0:0:0:0:0:0:0:0", true],
  ["::1", true],
  ["0:0:0:0:0:0:0:1", true],
  ["::2", true],
  ["::7f00:1", true],
  ["::8.8.8.8", true],
  ["::ffff:127.0.0.1", true],
  ["::ffff:7f00:1", true],
  ["::FFFF:10.0.0.1", true],
  ["::ffff:169.254.169.254", true],
  ["::ffff:0.0.0.0", true],
  ["::ffff:8.8.8.8", false],
  ["::ffff:808:808", false],
  ["64:ff9b::7f00:1", true],
  ["64:ff9b::8.8.8.8", true],
  ["64:ff9b:1::1", true],
  ["64:ff9b:1:ffff::1", true],
  ["100::1", true],
  ["100::ffff:ffff:ffff:ffff", true],
  ["2001::1", true],
  ["2001:1ff:ffff::1", true],
  ["2001:200::1", false],
  ["2001:db8::1", true],
  ["2001:db8:ffff::1", true],
  ["2002::1", true],
  ["2002:7f00:1::1", true],
  ["2002:808:808::1", true],
  ["2003::1", false],
  ["3fff::1", true],
  ["3fff:fff:ffff::1", true],
  ["3fff:1000::1", false],
  ["fc00::1", true],
  ["fd00:ec2::254", true],
  ["fdff:ffff::1", true],
  ["fe80::1", true],
  ["febf:ffff::1", true],
  ["fec0::1", true],
  ["feff:ffff::1", true],
  ["ff00::1", true],
  ["ff02::1", true],
  ["ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true],
  ["2606:4700:4700::1111", false],
  ["2001:4860:4860::8888", false],
  // Reserved by IANA, outside 2000::/3, the only global unicast space.
  ["1::1", true],
  ["::1:0:0:0", true],
  ["100:0:0:1::1", true],
  ["1fff:ffff:ffff::1", true],
  ["4000::1", true],
  ["e000::1", true],
  ["3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false],
];

Deno.test("isBlockedAddress() blocks every IPv4 range of the contract and nothing just outside", () => {
  for (const [address, blocked] of V4_CASES) {
    assert.equal(isBlockedAddress(address), blocked, address);
  }
});

Deno.test("isBlockedAddress() blocks every IPv6 range of the contract and nothing just outside", () => {
  for (const [address, blocked] of V6_CASES) {
    assert.equal(isBlockedAddress(address), blocked, address);
  }
});

Deno.test("isBlockedAddress() allows public unicast addresses", () => {
  for (const address of ["8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700:4700::1111"]) {
    assert.equal(isBlockedAddress(address), false, address);
  }
  // Anycast services IANA calls globally reachable: AS112 and AMT; in 2001::/23, blocked.
  for (const address of ["192.175.48.1", "192.31.196.1", "192.52.193.1", "2620:4f:8000::1"]) {
    assert.equal(isBlockedAddress(address), false, address);
  }
  for (const address of ["2001:4:112::1", "2001:3::1", "5f00::1"]) {
    assert.equal(isBlockedAddress(address), true, address);
  }
});

Deno.test("isBlockedAddress() checks an IPv4-mapped address as its IPv4 and blocks all NAT64", () => {
  assert.equal(isBlockedAddress("::ffff:127.0.0.1"), true);
  assert.equal(isBlockedAddress("::ffff:192.168.1.1"), true);
  assert.equal(isBlockedAddress("::ffff:1.1.1.1"), false);
  assert.equal(isBlockedAddress("64:ff9b::1.1.1.1"), true);
  assert.equal(isBlockedAddress("64:ff9b::a00:1"), true);
});

Deno.test("isBlockedAddress() blocks anything that is not an IP address in canonical notation", () => {
  const notAddresses = [
    "",
    "localhost",
    "example.com",
    "2130706433",
    "0x7f000001",
    "0177.0.0.1",
    "127.1",
    "010.0.0.1",
    "08.8.8.8",
    "256.1.1.1",
    " 8.8.8.8",
    "8.8.8.8/32",
    "[::1]",
    "[2606:4700:4700::1111]",
    "fe80::1%eth0",
    "2606:4700:4700::1111%eth0",
    "::ffff:0177.0.0.1",
    "::ffff:8.8.8",
    "1:2:3:4:5:6:7:8:9",
  ];
  for (const text of notAddresses) assert.equal(isBlockedAddress(text), true, text);
});

Deno.test("checkWebhookUrl() accepts a name that resolves only to public addresses", async () => {
  const { resolve, calls } = fakeResolver([
    ["hooks.example.com", ["93.184.215.14", "2606:4700:4700::1111", "93.184.215.14"]],
  ]);
  const checked = await checkWebhookUrl("https://Hooks.Example.COM:8443/parley?x=1", { resolve });
  assert.equal(checked.url.href, "https://hooks.example.com:8443/parley?x=1");
  assert.equal(checked.hostname, "hooks.example.com");
  assert.deepEqual(checked.addresses, ["93.184.215.14", "2606:4700:4700::1111"]);
  assert.deepEqual(calls, ["hooks.example.com"]);
});

Deno.test("checkWebhookUrl() strips a trailing dot before resolving", async () => {
  const { resolve, calls } = fakeResolver([["example.com", ["8.8.8.8"]]]);
  const checked = await checkWebhookUrl("https://example.com./", { resolve });
  assert.equal(checked.hostname, "example.com");
  assert.deepEqual(calls, ["example.com"]);
});

Deno.test("checkWebhookUrl() checks a public IP literal directly without resolving it", async () => {
  const { resolve, calls } = fakeResolver();
  const v4 = await checkWebhookUrl("https://8.8.8.8/hook", { resolve });
  assert.deepEqual([v4.hostname, v4.addresses], ["8.8.8.8", ["8.8.8.8"]]);
  const v6 = await checkWebhookUrl("https://[2606:4700:4700:0:0:0:0:1111]:8443/", { resolve });
  assert.deepEqual([v6.hostname, v6.addresses], ["2606:4700:4700::1111", [
    "2606:4700:4700::1111",
  ]]);
  const mapped = await checkWebhookUrl("https://[::ffff:1.1.1.1]/", { resolve });
  assert.deepEqual(mapped.addresses, ["::ffff:101:101"]);
  assert.deepEqual(calls, []);
});

Deno.test("checkWebhookUrl() refuses a blocked IP literal in every notation", async () => {
  const { resolve, calls } = fakeResolver();
  const literals = [
    "https://127.0.0.1/",
    "https://2130706433/",
    "https://0x7f000001/",
    "https://0177.0.0.1/",
    "https://127.1/",
    "https://0x7f.1/",
    "https://127.0.0.%31/",
    "https://127.0.0.1./",
    "https://2130706433./",
    "https://0/",
    "https://0.0.0.0:8443/",
    "https://10.0.0.1/",
    "https://169.254.169.254/latest/meta-data/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:7f00:1]/",
    "https://[::ffff:a9fe:a9fe]/",
    "https://[::]/",
    "https://[::1]/",
    "https://[0:0:0:0:0:0:0:1]/",
    "https://[::127.0.0.1]/",
    "https://[64:ff9b::127.0.0.1]/",
    "https://[2002:7f00:1::]/",
    "https://[fd00:ec2::254]/",
    "https://[fe80::1]/",
    "https://[ff02::1]/",
  ];
  for (const text of literals) {
    assert.match(await reasonOf(text, { resolve }), /^blocked address /, text);
  }
  assert.deepEqual(calls, []);
});

Deno.test("checkWebhookUrl() refuses an IPv6 literal with a zone id", async () => {
  const { resolve } = fakeResolver();
  for (const text of ["https://[fe80::1%25eth0]/", "https://[fe80::1%eth0]/"]) {
    assert.ok(await reasonOf(text, { resolve }), text);
  }
});

Deno.test("checkWebhookUrl() refuses a name that resolves to a loopback address", async () => {
  const { resolve, calls } = fakeResolver([["localhost", ["127.0.0.1"]]]);
  assert.equal(await reasonOf("https://LOCALHOST/", { resolve }), "blocked address 127.0.0.1");
  assert.deepEqual(calls, ["localhost"]);
});

Deno.test("checkWebhookUrl() refuses a name if any of its addresses is blocked", async () => {
  const { resolve } = fakeResolver([
    ["mixed.example", ["8.8.8.8", "10.0.0.1"]],
    ["mixed6.example", ["2606:4700:4700::1111", "fd00::1"]],
    ["mapped.example", ["::ffff:127.0.0.1"]],
    ["nat64.example", ["64:ff9b::808:808"]],
    ["compat.example", ["2606:4700:4700::1111", "::8.8.8.8"]],
  ]);
  assert.equal(await reasonOf("https://mixed.example/", { resolve }), "blocked address 10.0.0.1");
  assert.equal(await reasonOf("https://mixed6.example/", { resolve }), "blocked address fd00::1");
  assert.equal(
    await reasonOf("https://mapped.example/", { resolve }),
    "blocked address ::ffff:7f00:1",
  );
  assert.equal(
    await reasonOf("https://nat64.example/", { resolve }),
    "blocked address 64:ff9b::808:808",
  );
  assert.equal(
    await reasonOf("https://compat.example/", { resolve }),
    "blocked address ::808:808",
  );
});

Deno.test("checkWebhookUrl() refuses a name that does not resolve", async () => {
  const { resolve } = fakeResolver([["empty.example", []]]);
  assert.equal(await reasonOf("https://empty.example/", { resolve }), "does not resolve");
  assert.equal(await reasonOf("https://missing.example/", { resolve }), "does not resolve");
  const throwing: Resolver = () => {
    throw new Error("resolver broke");
  };
  assert.equal(await reasonOf("https://example.com/", { resolve: throwing }), "does not resolve");
});

Deno.test("checkWebhookUrl() refuses a resolved address that is not a canonical IP", async () => {
  const { resolve } = fakeResolver([
    ["zone.example", ["2606:4700:4700::1111%eth0"]],
    ["octal.example", ["010.8.8.8"]],
    ["junk.example", ["example.org"]],
  ]);
  for (const name of ["zone.example", "octal.example", "junk.example"]) {
    assert.match(await reasonOf(`https://${name}/`, { resolve }), /^not an IP address /, name);
  }
});

Deno.test("checkWebhookUrl() refuses every scheme but https", async () => {
  const { resolve } = fakeResolver([["example.com", ["8.8.8.8"]]]);
  for (const text of ["http://example.com/", "ftp://example.com/", "ws://example.com/"]) {
    assert.equal(await reasonOf(text, { resolve }), "not https", text);
  }
  assert.equal(await reasonOf("file:///etc/passwd", { resolve }), "not https");
  assert.equal((await checkWebhookUrl("HTTPS://example.com", { resolve })).url.protocol, "https:");
});

Deno.test("checkWebhookUrl() refuses userinfo, even empty", async () => {
  const { resolve } = fakeResolver([["example.com", ["8.8.8.8"]]]);
  const texts = [
    "https://user:pass@example.com/",
    "https://user@example.com/",
    "https://:pass@example.com/",
    "https://@example.com/",
    "https://evil.example@example.com/",
  ];
  for (const text of texts) assert.equal(await reasonOf(text, { resolve }), "userinfo", text);
});

Deno.test("checkWebhookUrl() refuses a fragment, even empty", async () => {
  const { resolve } = fakeResolver([["example.com", ["8.8.8.8"]]]);
  const texts = ["https://example.com/#", "https://example.com/#top", "https://example.com/?a=1#b"];
  for (const text of texts) assert.equal(await reasonOf(text, { resolve }), "fragment", text);
});

Deno.test("checkWebhookUrl() refuses port 0, where nothing can be delivered, and no other", async () => {
  const { resolve } = fakeResolver([["example.com", ["8.8.8.8"]]]);
  for (const text of ["https://8.8.8.8:0/", "https://example.com:00/h"]) {
    assert.equal(await reasonOf(text, { resolve }), "port 0", text);
  }
  for (
    const text of [
      "https://example.com:1/",
      "https://example.com:65535/",
      "https://example.com:443/",
    ]
  ) {
    assert.equal((await checkWebhookUrl(text, { resolve })).url.href.startsWith("https://"), true);
  }
});

Deno.test("checkWebhookUrl() refuses control characters and whitespace anywhere in the text", async () => {
  const { resolve } = fakeResolver([["example.com", ["8.8.8.8"]]]);
  const texts = [
    "https://example.com/\r\nX-Injected: 1",
    "https://example.com/\n",
    "https://exa\tmple.com/",
    "https://example.com/\r",
    "https://example.com/\u0000",
    "https://example.com/\u007f",
    " https://example.com/",
    "https://example.com/a b",
    "https://example.com/\u00a0",
    "https://example.com/\u2028",
    "https://example.com/\u200b",
  ];
  for (const text of texts) {
    assert.equal(
      await reasonOf(text, { resolve }),
      "control characters or whitespace",
      JSON.stringify(text),
    );
  }
});

Deno.test("checkWebhookUrl() refuses text that is not a URL", async () => {
  const { resolve } = fakeResolver();
  for (const text of ["", "example.com", "https://", "https://[::1/", "https://exa%20mple.com/"]) {
    assert.ok(await reasonOf(text, { resolve }), text);
  }
});

Deno.test("checkWebhookUrl() throws an UnsafeUrlError with the contract's message", async () => {
  const { resolve } = fakeResolver();
  const error = await checkWebhookUrl("http://example.com/", { resolve }).catch((e) => e);
  assert.ok(error instanceof UnsafeUrlError);
  assert.ok(error instanceof Error);
  assert.equal(error.name, "UnsafeUrlError");
  assert.equal(error.message, "url must be an https URL that resolves to a public address");
  assert.equal(error.reason, "not https");
});

Deno.test("checkWebhookUrl() exempts a host named in the allow list, and only that host", async () => {
  const { resolve } = fakeResolver([
    ["localhost", ["127.0.0.1", "::1"]],
    ["internal.example", ["10.0.0.1"]],
  ]);
  const allow = parseAllowList("LocalHost.");
  const checked = await checkWebhookUrl("https://LOCALHOST.:8080/hook", { resolve, allow });
  assert.equal(checked.hostname, "localhost");
  assert.deepEqual(checked.addresses, ["127.0.0.1", "::1"]);
  assert.equal(
    await reasonOf("https://internal.example/", { resolve, allow }),
    "blocked address 10.0.0.1",
  );
  assert.equal(
    await reasonOf("https://127.0.0.1/", { resolve, allow }),
    "blocked address 127.0.0.1",
  );
  assert.equal(await reasonOf("http://localhost/", { resolve, allow }), "not https");
});

Deno.test("checkWebhookUrl() still refuses an allow-listed name that does not resolve", async () => {
  const { resolve } = fakeResolver();
  const allow = parseAllowList("gone.example");
  assert.equal(await reasonOf("https://gone.example/", { resolve, allow }), "does not resolve");
});

Deno.test("checkWebhookUrl() exempts addresses inside an allow-listed CIDR, and only those", async () => {
  const { resolve } = fakeResolver([
    ["inside.example", ["10.1.2.3"]],
    ["partly.example", ["10.1.2.3", "192.168.0.1"]],
    ["mapped.example", ["::ffff:127.0.0.1"]],
  ]);
  const allow = parseAllowList("10.0.0.0/8, ::1/128, 127.0.0.1/32");
  assert.deepEqual(
    (await checkWebhookUrl("https://inside.example/", { resolve, allow })).addresses,
    ["10.1.2.3"],
  );
  assert.deepEqual(
    (await checkWebhookUrl("https://10.0.0.5/", { resolve, allow })).addresses,
    ["10.0.0.5"],
  );
  assert.deepEqual((await checkWebhookUrl("https://[::1]/", { resolve, allow })).addresses, [
    "::1",
  ]);
  assert.deepEqual(
    (await checkWebhookUrl("https://mapped.example/", { resolve, allow })).addresses,
    ["::ffff:7f00:1"],
  );
  assert.equal(
    await reasonOf("https://partly.example/", { resolve, allow }),
    "blocked address 192.168.0.1",
  );
  assert.equal(
    await reasonOf("https://127.0.0.2/", { resolve, allow }),
    "blocked address 127.0.0.2",
  );
  assert.equal(await reasonOf("https://[::2]/", { resolve, allow }), "blocked address ::2");
  assert.equal(await reasonOf("https://11.0.0.1#x", { resolve, allow }), "fragment");
});

Deno.test("checkWebhookUrl() ignores an unparseable CIDR in a hand-built allow list", async () => {
  const { resolve } = fakeResolver();
  const allow: AllowList = { names: [], cidrs: ["10.0.0.0/99", "nonsense"] };
  assert.equal(await reasonOf("https://10.0.0.1/", { resolve, allow }), "blocked address 10.0.0.1");
});

Deno.test("parseAllowList() reads host names and CIDRs and normalizes them", () => {
  assert.deepEqual(parseAllowList(undefined), { names: [], cidrs: [] });
  assert.deepEqual(parseAllowList(""), { names: [], cidrs: [] });
  assert.deepEqual(
    parseAllowList(
      " Hooks.Example.com. , localhost,,10.0.0.0/8, 127.0.0.1/32, ::1/128, [::1], FD00:0:0::/8, " +
        "192.168.1.7 , localhost ",
    ),
    {
      names: ["hooks.example.com", "localhost"],
      cidrs: ["10.0.0.0/8", "127.0.0.1/32", "::1/128", "fd00::/8", "192.168.1.7/32"],
    },
  );
});

Deno.test("parseAllowList() throws a RangeError naming the bad entry", () => {
  const bad = [
    "10.0.0.0/33",
    "::/129",
    "10.0.0.0/",
    "10.0.0.0/8/8",
    "10.0.0.0/x",
    "10.1/8",
    "0177.0.0.1/8",
    "127.1",
    "2130706433",
    "0x7f000001",
    "exa mple.com",
    "user@example.com",
    "example.com:8080",
    "-bad.example",
    "a..b",
    "https://example.com",
    "fe80::1%eth0",
  ];
  for (const entry of bad) {
    assert.throws(
      () => parseAllowList(`localhost, ${entry}, 10.0.0.0/8`),
      (error: unknown) => {
        assert.ok(error instanceof RangeError, entry);
        assert.ok(error.message.includes(`"${entry}"`), `${entry}: ${error.message}`);
        return true;
      },
    );
  }
});

Deno.test("checkWebhookUrl() refuses this machine's own public addresses, in any notation", async () => {
  const { resolve } = fakeResolver([
    ["self.example.com", ["93.184.215.14"]],
    ["other.example.com", ["93.184.215.15"]],
  ]);
  const own = ["93.184.215.14", "2606:4700:4700::1111", "127.0.0.1"];
  for (
    const url of [
      "https://self.example.com/hook",
      "https://93.184.215.14:2375/",
      "https://[::ffff:93.184.215.14]/",
      "https://[2606:4700:4700:0:0:0:0:1111]/",
    ]
  ) {
    assert.match(await reasonOf(url, { resolve, own }), /^blocked address/, url);
  }
  const other = await checkWebhookUrl("https://other.example.com/hook", { resolve, own });
  assert.deepEqual(other.addresses, ["93.184.215.15"]);
  // An allow-listed own address (a receiver on this machine, in tests) passes.
  const allow = parseAllowList("93.184.215.14");
  const allowed = await checkWebhookUrl("https://self.example.com/hook", { resolve, own, allow });
  assert.deepEqual(allowed.addresses, ["93.184.215.14"]);
});

Deno.test("machineAddresses() lists this machine's interfaces, loopback among them", () => {
  assert.ok(machineAddresses().includes("127.0.0.1"), machineAddresses().join());
});
