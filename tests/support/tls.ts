/**
 * Self-signed TLS certificates for tests that run an HTTPS receiver on loopback: the certificate
 * is made fresh in memory by the `selfsigned` package (nothing is read from or written to disk)
 * and the test passes it to the client as an extra root (`caCerts`).
 */
import { generate } from "selfsigned";

/** A PEM certificate and its PEM private key. */
export interface TestCertificate {
  /** The self-signed certificate (PEM); also the root a client must trust. */
  cert: string;
  /** The certificate's private key (PEM, PKCS#8). */
  key: string;
}

/**
 * Makes a self-signed server certificate valid for one day whose subjectAltName lists every name
 * of `hostnames` (as DNS names) and the loopback addresses `127.0.0.1` and `::1`. The first name
 * is also the common name. The certificate is an end entity (not a CA), signed with ECDSA P-256
 * and SHA-256, which rustls (Deno's TLS) accepts as a trust anchor of itself.
 */
export async function selfSignedCertificate(hostnames: string[]): Promise<TestCertificate> {
  const now = new Date();
  const pems = await generate([{ name: "commonName", value: hostnames[0] ?? "localhost" }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    notBeforeDate: new Date(now.getTime() - 60_000),
    notAfterDate: new Date(now.getTime() + 24 * 60 * 60 * 1000),
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: [
          ...hostnames.map((value) => ({ type: 2 as const, value })),
          { type: 7, ip: "127.0.0.1" },
          { type: 7, ip: "::1" },
        ],
      },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}
