/**
 * Where Parley's database is: `DATABASE_URL` when given, else the embedded PostgreSQL under
 * `DATA_DIR` (shared with a server already running on it, started otherwise). The server
 * and the CLI resolve it the same way.
 */
import type { Config } from "../config.ts";
import { openEmbeddedPostgres } from "./embedded.ts";

/** A database to connect to, and how to let go of it. */
export interface DatabaseLocation {
  url: string;
  /** Whether it is the embedded server under `DATA_DIR` (this process's or shared). */
  embedded: boolean;
  /** Stops the embedded server when it is this process's (see `EmbeddedPostgres.stop`). */
  close(): Promise<void>;
}

/**
 * Resolves the database of `config`, starting the embedded server when needed. `onLost` hears
 * when the embedded server (this process's or shared) went and could not be started again;
 * `forCommand`: the process is an admin command (see `EmbeddedPostgresOptions.forCommand`).
 */
export async function openDatabase(
  config: Pick<Config, "databaseUrl" | "dataDir">,
  onLost?: (error: Error) => void,
  options: { forCommand?: boolean } = {},
): Promise<DatabaseLocation> {
  if (config.databaseUrl) {
    return { url: config.databaseUrl, embedded: false, close: () => Promise.resolve() };
  }
  const server = await openEmbeddedPostgres({
    dataDir: config.dataDir,
    onLost,
    forCommand: options.forCommand,
  });
  return { url: server.url, embedded: true, close: () => server.stop() };
}
