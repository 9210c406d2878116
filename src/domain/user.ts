/** Rules for dashboard users: what an email, a password and a role must be. No I/O. */

/** What a dashboard user may do. */
export type UserRole = "admin" | "agent";

/** The roles, in the order the CLI lists them. */
export const USER_ROLES: readonly UserRole[] = ["admin", "agent"];

/** Fewest characters (code points) a password may have (NIST SP 800-63B's minimum). */
export const MIN_PASSWORD_LENGTH = 8;
/** Most characters a password may have: enough for any passphrase, bounded for the hash. */
export const MAX_PASSWORD_LENGTH = 1024;

/**
 * The email to store, trimmed and in Unicode's composed form (NFC); throws with a message for
 * one that is not `local@domain` (one `@`, no spaces, control or invisible formatting characters
 * such as a zero-width space, a dot in the domain, at most 254 characters).
 */
export function parseEmail(text: string): string {
  const email = text.trim().normalize("NFC");
  if (
    email.length > 254 ||
    !/^[^\s@\p{Cc}\p{Cf}]{1,64}@[^\s@\p{Cc}\p{Cf}.]+(\.[^\s@\p{Cc}\p{Cf}.]+)+$/u.test(email)
  ) {
    throw new Error(`"${text}" is not an email address`);
  }
  return email;
}

/**
 * What makes two emails the same user: compatibility-normalized (NFKC) and lowercased, so that
 * `ÉLODIE@EXÄMPLE.COM`, `élodie@exämple.com` and its decomposed spelling are one address.
 */
export function emailKey(email: string): string {
  return email.normalize("NFKC").toLowerCase().normalize("NFKC");
}

/** Throws with a message unless `password` has an allowed length. */
export function checkPassword(password: string): void {
  const length = [...password].length;
  if (length < MIN_PASSWORD_LENGTH) {
    throw new Error(`The password must have at least ${MIN_PASSWORD_LENGTH} characters`);
  }
  if (length > MAX_PASSWORD_LENGTH) {
    throw new Error(`The password must have at most ${MAX_PASSWORD_LENGTH} characters`);
  }
}

/** The role named by `text`; throws with a message for any other word. */
export function parseRole(text: string): UserRole {
  const role = USER_ROLES.find((r) => r === text);
  if (!role) throw new Error(`The role must be one of: ${USER_ROLES.join(", ")}`);
  return role;
}
