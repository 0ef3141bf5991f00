/**
 * The one base of Kiln's own errors. Its `name` is the subclass's, so logs and Temporal failures
 * say which error it is, and `cause` keeps the error it wraps with its stack
 * (docs/development.md#errors).
 */
export class KilnError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The message of whatever was thrown, for a wrapping error's own message (its `cause` keeps the rest). */
export const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));
