/** A WhatsApp channel configured for a test application, as `whatsapp:configure` does it. */
import { Buffer } from "node:buffer";
import type { Sql } from "../../src/db/client.ts";
import { executeCommand } from "../../src/cli.ts";
import { createSecretBox } from "../../src/crypto/secret_box.ts";
import { TEST_ENCRYPTION_KEY } from "./server.ts";

/** The business number and secrets the tests configure (and the fake Graph API expects). */
export const TEST_WHATSAPP = {
  phoneNumberId: "106540352242922",
  accessToken: "EAAG-test-token",
  appSecret: "meta-app-secret",
  verifyToken: "verify-me",
} as const;

/** Configures {@linkcode TEST_WHATSAPP} for application `appId` through the CLI command. */
export async function configureWhatsApp(sql: Sql, appId: number): Promise<unknown> {
  const box = createSecretBox(new Uint8Array(Buffer.from(TEST_ENCRYPTION_KEY, "base64")));
  return await executeCommand(sql, {
    command: "whatsapp:configure",
    flags: {
      app: String(appId),
      "phone-number-id": TEST_WHATSAPP.phoneNumberId,
      "access-token": TEST_WHATSAPP.accessToken,
      "app-secret": TEST_WHATSAPP.appSecret,
      "verify-token": TEST_WHATSAPP.verifyToken,
    },
  }, { secretBox: () => Promise.resolve(box) });
}
