/**
 * Where the key of the secret box comes from (CONTRACT §1): `PARLEY_ENCRYPTION_KEY` (base64 of
 * 32 bytes) when set; in embedded mode, a key generated once into `DATA_DIR/encryption_key`
 * (mode 0600) and read on every later start; with an external database and no key, Parley
 * refuses to start rather than store secrets it could not read back elsewhere.
 */
import { Buffer } from "node:buffer";

/** Options of {@linkcode loadEncryptionKey}. */
export interface EncryptionKeySource {
  /** `PARLEY_ENCRYPTION_KEY`, if set. */
  configured: string | null;
  /** The embedded mode's data directory; null with an external database. */
  dataDir: string | null;
}

const KEY_FILE = "encryption_key";

/** The 32-byte key; throws a readable error when there is none or it is malformed. */
export async function loadEncryptionKey(source: EncryptionKeySource): Promise<Uint8Array> {
  if (source.configured !== null) return decodeKey(source.configured, "PARLEY_ENCRYPTION_KEY");
  if (source.dataDir === null) {
    throw new Error("Invalid configuration: PARLEY_ENCRYPTION_KEY is required with DATABASE_URL");
  }
  const path = `${source.dataDir}/${KEY_FILE}`;
  // The key made before is read: nothing is written (a full disk does not stop a start).
  const existing = await Deno.readTextFile(path).catch((error) => {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  });
  if (existing !== null) return decodeKey(existing.trim(), path);
  await Deno.mkdir(source.dataDir, { recursive: true });
  const key = crypto.getRandomValues(new Uint8Array(32));
  // Written whole to a file of its own, then linked into place: linking fails when the key
  // exists, so processes starting at once agree on the first, and nobody reads half a key.
  const draft = `${path}.${crypto.randomUUID()}`;
  try {
    await Deno.writeTextFile(draft, Buffer.from(key).toString("base64") + "\n", { mode: 0o600 });
    await Deno.link(draft, path);
    return key;
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
  } finally {
    // Also a draft a full disk left half written.
    await Deno.remove(draft).catch(() => {});
  }
  return decodeKey((await Deno.readTextFile(path)).trim(), path);
}

function decodeKey(text: string, where: string): Uint8Array {
  const bytes = /^[A-Za-z0-9+/]+={0,2}$/.test(text) ? Buffer.from(text, "base64") : Buffer.alloc(0);
  if (bytes.length !== 32) {
    throw new Error(`Invalid configuration: ${where} must be 32 bytes in base64`);
  }
  return new Uint8Array(bytes);
}
