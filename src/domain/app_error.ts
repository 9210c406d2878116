/**
 * The one error type that carries a contract status and a stable, client-safe message. It is
 * thrown anywhere a request must end with a given answer and rendered in exactly one place
 * (the HTTP error handler); its `cause` is logged, never returned.
 */

/** An error with an HTTP status and a message that may be shown to the client. */
export class AppError extends Error {
  /** HTTP status of the answer. */
  readonly status: number;
  /** Extra response headers (e.g. `WWW-Authenticate`). */
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    message: string,
    options: { cause?: unknown; headers?: Record<string, string> } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = "AppError";
    this.status = status;
    this.headers = options.headers ?? {};
  }
}
