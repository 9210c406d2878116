/** Queries of the `users` table: the dashboard's logins (CONTRACT §1 `user:create`). */
import type { Sql } from "./client.ts";
import type { UserRole } from "../domain/user.ts";

/** A new user's row: what to store (the password already hashed). */
export interface NewUser {
  appId: number;
  email: string;
  /** What makes two emails the same user (`emailKey`). */
  emailKey: string;
  passwordHash: string;
  role: UserRole;
}

/**
 * Stores a user; returns its id and email, or null when the application already has a user
 * with that email key.
 */
export async function insertUser(
  sql: Sql,
  user: NewUser,
): Promise<{ id: number; email: string } | null> {
  const [row] = await sql<{ id: number; email: string }[]>`
    INSERT INTO users (app_id, email, email_key, password_hash, role)
    VALUES (${user.appId}, ${user.email}, ${user.emailKey}, ${user.passwordHash}, ${user.role})
    ON CONFLICT (app_id, email_key) DO NOTHING
    RETURNING id, email`;
  return row ?? null;
}
