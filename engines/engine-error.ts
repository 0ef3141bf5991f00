import type { KilnFailureType } from '../domain/failures';
import { KilnError } from '../lib/kiln-error';

/**
 * What an engine throws on purpose: a failure type of the domain's taxonomy, which says whether
 * another attempt can help. Engines know nothing of Temporal; activities turn this into the
 * Temporal failure of the same type (activities/engine-failures.ts).
 */
export class EngineError extends KilnError {
  constructor(
    readonly type: KilnFailureType,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
