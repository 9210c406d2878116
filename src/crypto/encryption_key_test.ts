import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { loadEncryptionKey } from "./encryption_key.ts";

Deno.test("loadEncryptionKey() decodes PARLEY_ENCRYPTION_KEY and refuses a key of the wrong size", async () => {
  const key = new Uint8Array(32).fill(9);
  const configured = Buffer.from(key).toString("base64");
  assert.deepEqual(await loadEncryptionKey({ configured, dataDir: null }), key);
  await assert.rejects(
    loadEncryptionKey({ configured: Buffer.alloc(16).toString("base64"), dataDir: null }),
    /PARLEY_ENCRYPTION_KEY must be 32 bytes in base64/,
  );
  await assert.rejects(
    loadEncryptionKey({ configured: "not base64!", dataDir: null }),
    /must be 32 bytes/,
  );
});

Deno.test("loadEncryptionKey() is required with an external database", async () => {
  await assert.rejects(
    loadEncryptionKey({ configured: null, dataDir: null }),
    /PARLEY_ENCRYPTION_KEY is required with DATABASE_URL/,
  );
});

Deno.test("loadEncryptionKey() generates one key into the data directory, mode 0600, and keeps it", async () => {
  const dataDir = await Deno.makeTempDir();
  try {
    const [first, racing] = await Promise.all([
      loadEncryptionKey({ configured: null, dataDir }),
      loadEncryptionKey({ configured: null, dataDir }),
    ]);
    assert.equal(first.length, 32);
    assert.deepEqual(racing, first, "two processes starting at once agree");
    assert.deepEqual(await loadEncryptionKey({ configured: null, dataDir }), first);
    const info = await Deno.stat(`${dataDir}/encryption_key`);
    assert.equal(info.mode! & 0o777, 0o600);
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("loadEncryptionKey() reads the key made before without writing, and leaves no draft when writing fails", async () => {
  const dataDir = await Deno.makeTempDir();
  const write = Deno.writeTextFile;
  try {
    const first = await loadEncryptionKey({ configured: null, dataDir });
    // A full disk: every write fails, half done.
    Deno.writeTextFile = async (path, data) => {
      await write(path, String(data).slice(0, 3));
      throw new Deno.errors.WriteZero("No space left on device (os error 28)");
    };
    assert.deepEqual(await loadEncryptionKey({ configured: null, dataDir }), first);
    await Deno.remove(`${dataDir}/encryption_key`);
    await assert.rejects(loadEncryptionKey({ configured: null, dataDir }), /No space left/);
    const left = await Array.fromAsync(Deno.readDir(dataDir), (entry) => entry.name);
    assert.deepEqual(left, [], "no draft left behind");
  } finally {
    Deno.writeTextFile = write;
    await Deno.remove(dataDir, { recursive: true });
  }
});
