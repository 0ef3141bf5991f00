import { kilnFailure } from '../domain/failures';
import { EngineError } from '../engines/engine-error';

/** An engine's error as the Temporal failure of its type (with the engine's error as its cause); anything else as it is. */
export function toActivityFailure(err: unknown): unknown {
  if (!(err instanceof EngineError)) return err;
  return kilnFailure(err.type, err.message, undefined, err);
}

/** `fn`, with the engine errors it throws turned into Temporal failures. */
export function mappingEngineErrors<A extends unknown[], R>(fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return async (...args: A) => {
    try {
      return await fn(...args);
    } catch (err) {
      throw toActivityFailure(err);
    }
  };
}
