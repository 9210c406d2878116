/**
 * The admin CLI (`deno task cli <command> [--flag value ...]`, CONTRACT §1). Each command prints
 * one JSON document on stdout and exits 0; an error prints `{"error": "..."}` on stderr and
 * exits 1. Writes that belong to an application go through the same write transaction as the
 * actors use, so they are serialized with the running server's writes.
 */
import { loadConfig } from "./config.ts";
import { awaitFirstContact, connect, type Sql } from "./db/client.ts";
import { COMMAND_APPLICATION_NAME } from "./db/embedded.ts";
import { openDatabase } from "./db/database.ts";
import { migrate } from "./db/migrate.ts";
import { findApplication, insertApplication } from "./db/applications.ts";
import { commitBatch } from "./db/write_batch.ts";
import { insertApiKey, listApiKeys, MAX_ACTIVE_API_KEYS, revokeApiKey } from "./db/api_keys.ts";
import { newApiKey, sha256Bytes } from "./crypto/tokens.ts";
import { AppError } from "./domain/app_error.ts";
import { parseFlow } from "./domain/flow.ts";
import { findFlow } from "./db/flows.ts";
import { replaceWhatsAppChannel } from "./db/whatsapp_channels.ts";
import { createInstallUrl } from "./channels/slack/installer.ts";
import { createSecretBox, type SecretBox } from "./crypto/secret_box.ts";
import { loadEncryptionKey } from "./crypto/encryption_key.ts";
import { checkEncryptionKey } from "./db/key_check.ts";
import { setLogLevel } from "./log.ts";
import { insertUser } from "./db/users.ts";
import { findPublicBaseUrl } from "./db/public_base_url.ts";
import { checkPassword, emailKey, parseEmail, parseRole } from "./domain/user.ts";
import { hashPassword } from "./crypto/password.ts";

/** A parsed command line: the command name and its `--flag value` pairs. */
export interface CommandLine {
  command: string;
  flags: Record<string, string>;
}

/**
 * Parses `command --name value ...` (or `--name=value`); throws on an unknown command, a flag
 * the command does not take (a typo must not pass for a default), a flag without a value or a
 * stray word. A value may start with `--` (a password, say) unless it names one of the
 * command's flags.
 */
export function parseCommandLine(args: string[]): CommandLine {
  const [command, ...rest] = args;
  const known = COMMANDS[command]?.flags;
  if (!command || !known) {
    const list = Object.keys(COMMANDS).join(", ");
    throw new Error(
      command
        ? `Unknown command "${command}": expected one of ${list}`
        : `Missing command: expected one of ${list}`,
    );
  }
  const checked = (name: string) => {
    if (!known.includes(name)) {
      throw new Error(
        `Unknown flag --${name} for ${command}: expected ${known.map((f) => `--${f}`).join(", ")}`,
      );
    }
    return name;
  };
  const flags: Record<string, string> = {};
  /** Sets a flag once: given twice, which one was meant is anybody's guess. */
  const set = (name: string, value: string) => {
    if (Object.hasOwn(flags, checked(name))) throw new Error(`Flag --${name} given twice`);
    flags[name] = value;
  };
  let last: string | null = null;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    const inline = /^--([a-z][a-z0-9-]*)=(.*)$/s.exec(arg);
    if (inline) {
      set(inline[1], inline[2]);
      last = inline[1];
      continue;
    }
    const flag = /^--([a-z][a-z0-9-]*)$/.exec(arg);
    if (!flag) {
      // The argument itself is not repeated: it may be half of a secret typed without quotes.
      throw new Error(
        last === null
          ? "Unexpected argument before the first flag"
          : `Unexpected argument after the value of --${last} (quote a value containing spaces)`,
      );
    }
    const value = rest[i + 1];
    const next = value === undefined ? null : /^--([a-z][a-z0-9-]*)(=|$)/.exec(value);
    if (value === undefined || (next && known.includes(next[1]))) {
      throw new Error(`Flag --${checked(flag[1])} needs a value`);
    }
    set(flag[1], value);
    last = flag[1];
    i++;
  }
  return { command, flags };
}

/** What commands may need beyond the database. */
export interface CliContext {
  /** The box that seals secrets before they are stored (CONTRACT §7), loaded on first use. */
  secretBox?: () => Promise<SecretBox>;
  /** Where Parley is reached (`PUBLIC_BASE_URL`), for links it prints. */
  publicBaseUrl?: string;
}

type Handler = (sql: Sql, flags: Record<string, string>, context: CliContext) => Promise<unknown>;

/** Each command: the flags it takes and what it does. */
const COMMANDS: Record<string, { flags: readonly string[]; run: Handler }> = {
  "app:create": {
    flags: ["name"],
    run: async (sql, flags) => {
      const name = required(flags, "name").trim();
      if (name === "") throw new Error("Flag --name must not be blank");
      return await insertApplication(sql, name);
    },
  },
  "key:create": {
    flags: ["app", "name"],
    run: async (sql, flags) => {
      const appId = await existingApp(sql, flags);
      const name = flags.name?.trim() || null;
      const key = newApiKey();
      const id = await insertApiKey(sql, {
        appId,
        name,
        keyHash: sha256Bytes(key),
        prefix: key.slice("parley_".length, "parley_".length + 8),
      });
      if (id === null) {
        throw new Error(`An application can have at most ${MAX_ACTIVE_API_KEYS} active API keys`);
      }
      return { id, key, name };
    },
  },
  "key:list": {
    flags: ["app"],
    run: async (sql, flags) => await listApiKeys(sql, await existingApp(sql, flags)),
  },
  "key:revoke": {
    flags: ["app", "id"],
    run: async (sql, flags) => {
      const appId = await existingApp(sql, flags);
      const revoked = await revokeApiKey(sql, appId, id(flags, "id"));
      if (!revoked) throw new Error(`API key ${flags.id} not found`);
      return revoked;
    },
  },
  "chat:close": {
    flags: ["app", "id"],
    run: async (sql, flags) => {
      const appId = await existingApp(sql, flags);
      const chatId = id(flags, "id");
      const [result] = await commitBatch(sql, [{ kind: "chat.close", appId, chatId }]);
      if (!result.ok) throw new AppError(result.status, result.message);
      return result.value;
    },
  },
  "flow:set": {
    flags: ["app", "file"],
    run: async (sql, flags) => {
      const appId = await existingApp(sql, flags);
      const file = required(flags, "file");
      let text: string;
      try {
        text = await Deno.readTextFile(file);
      } catch (error) {
        throw new Error(`Cannot read ${file}: ${error instanceof Error ? error.message : error}`);
      }
      let document: unknown;
      try {
        document = JSON.parse(text);
      } catch {
        // Not the parser's words: they quote the file, which may be a secret given by mistake.
        throw new Error(`${file} is not JSON`);
      }
      const flow = parseFlow(document);
      const [result] = await commitBatch(sql, [{ kind: "flow.set", appId, flow }]);
      if (!result.ok) throw new AppError(result.status, result.message);
      return result.value;
    },
  },
  "flow:get": {
    flags: ["app"],
    run: async (sql, flags) => await findFlow(sql, await existingApp(sql, flags)),
  },
  "slack:install-url": {
    flags: ["app"],
    run: async (sql, flags, context) => {
      const appId = await existingApp(sql, flags);
      return {
        url: await createInstallUrl(sql, context.publicBaseUrl ?? "http://localhost:8080", appId),
      };
    },
  },
  "whatsapp:configure": {
    flags: [
      "app",
      "phone-number-id",
      ...withFileFlags("access-token", "app-secret", "verify-token"),
    ],
    run: async (sql, flags, context) => {
      const appId = await existingApp(sql, flags);
      if (!context.secretBox) throw new Error("whatsapp:configure needs the encryption key");
      const box = await context.secretBox();
      const phoneNumberId = required(flags, "phone-number-id").trim();
      if (!/^[0-9]{1,32}$/.test(phoneNumberId)) {
        throw new Error("Flag --phone-number-id must be the numeric id Meta shows for the number");
      }
      const secrets = [];
      for (const name of ["access-token", "app-secret", "verify-token"]) {
        const value = (await secret(flags, name)).trim();
        if (value === "") throw new Error(`Flag --${name} must not be blank`);
        secrets.push(value);
      }
      const stored = await replaceWhatsAppChannel(sql, {
        appId,
        phoneNumberId,
        accessTokenSealed: box.seal(secrets[0]),
        appSecretSealed: box.seal(secrets[1]),
        verifyTokenSealed: box.seal(secrets[2]),
      });
      if (!stored) {
        throw new Error(`Phone number ${phoneNumberId} is configured for another application`);
      }
      return { app_id: appId, phone_number_id: phoneNumberId };
    },
  },
  "user:create": {
    flags: ["app", "email", ...withFileFlags("password"), "role"],
    run: async (sql, flags) => {
      const appId = await existingApp(sql, flags);
      const email = parseEmail(required(flags, "email"));
      const password = await secret(flags, "password");
      checkPassword(password);
      const role = parseRole(flags.role ?? "agent");
      const user = await insertUser(sql, {
        appId,
        email,
        emailKey: emailKey(email),
        passwordHash: await hashPassword(password),
        role,
      });
      if (!user) throw new Error(`Application ${appId} already has a user with email ${email}`);
      return user;
    },
  },
};

/** Secret flags and their `-file` twins (a secret on the command line shows in `ps`). */
function withFileFlags(...names: string[]): string[] {
  return names.flatMap((name) => [name, `${name}-file`]);
}

/**
 * Secret flag `name`: its value, or the content of the file `--NAME-file` names (`/dev/stdin`
 * too), without its final line break.
 */
async function secret(flags: Record<string, string>, name: string): Promise<string> {
  const path = flags[`${name}-file`];
  if (path === undefined) return required(flags, name);
  if (flags[name] !== undefined) throw new Error(`Give --${name} or --${name}-file, not both`);
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    throw new Error(`Cannot read --${name}-file ${path}: ${(error as Error).message}`);
  }
  return text.replace(/\r?\n$/, "");
}

function required(flags: Record<string, string>, name: string): string {
  const value = flags[name];
  if (value === undefined) throw new Error(`Missing flag --${name}`);
  return value;
}

function id(flags: Record<string, string>, name: string): number {
  const value = required(flags, name);
  if (!/^[1-9][0-9]*$/.test(value)) {
    throw new Error(`Flag --${name} must be a positive integer`);
  }
  // Beyond it a number would name a neighbouring id.
  if (!Number.isSafeInteger(Number(value))) {
    throw new Error(`Flag --${name} must be at most ${Number.MAX_SAFE_INTEGER}`);
  }
  return Number(value);
}

async function existingApp(sql: Sql, flags: Record<string, string>): Promise<number> {
  const appId = id(flags, "app");
  if (!(await findApplication(sql, appId))) throw new Error(`Application ${appId} not found`);
  return appId;
}

/** The handler of `command`; throws the CLI's error for an unknown one. */
function handlerOf(command: string): Handler {
  const handler = COMMANDS[command]?.run;
  if (!handler) {
    throw new Error(
      `Unknown command "${command}": expected one of ${Object.keys(COMMANDS).join(", ")}`,
    );
  }
  return handler;
}

/** Runs a parsed command line against `sql`; resolves to what the command prints. */
export async function executeCommand(
  sql: Sql,
  line: CommandLine,
  context: CliContext = {},
): Promise<unknown> {
  return await handlerOf(line.command)(sql, line.flags, context);
}

/** Runs one command line; resolves to the process exit code. */
export async function runCli(args: string[]): Promise<number> {
  setLogLevel("silent");
  let location: Awaited<ReturnType<typeof openDatabase>> | null = null;
  let sql: Sql | null = null;
  try {
    const line = parseCommandLine(args);
    handlerOf(line.command);
    const config = loadConfig();
    location = await openDatabase(config, undefined, { forCommand: true });
    sql = connect(location.url, { max: 2, applicationName: COMMAND_APPLICATION_NAME });
    await awaitFirstContact(sql);
    await migrate(sql);
    const secretBox = async () => {
      const box = createSecretBox(
        await loadEncryptionKey({
          configured: config.encryptionKey,
          dataDir: config.databaseUrl === null ? config.dataDir : null,
        }),
      );
      await checkEncryptionKey(sql!, box);
      return box;
    };
    // Links go where the running server is reached, unless this environment says where.
    const publicBaseUrl = config.publicBaseUrlSet
      ? config.publicBaseUrl
      : (await findPublicBaseUrl(sql)) ?? config.publicBaseUrl;
    const output = await executeCommand(sql, line, { secretBox, publicBaseUrl });
    console.log(JSON.stringify(output));
    return 0;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    console.error(JSON.stringify({ error: message }));
    return 1;
  } finally {
    // Every query has settled but one that waits for a database that never answered.
    await sql?.end({ timeout: 0 });
    await location?.close();
  }
}

if (import.meta.main) Deno.exit(await runCli(Deno.args));
