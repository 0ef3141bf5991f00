/**
 * A test fixture, not an engine: it "runs" a prediction by sleeping for the time asked and
 * echoing the text back. It lets benchmarks of the orchestration (fair queuing, overhead,
 * sustained load) control the service time exactly. It is only served when
 * KILN_ENABLE_FIXTURES is on, and its model is named kiln/echo-fixture.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { kilnFailure } from '../../workflows/failures';

export const echoFixtureInput = z.strictObject({
  text: z.string().max(10_000).default(''),
  sleep_ms: z.number().int().min(0).max(600_000).default(0),
  /** Fails the first N attempts of a prediction on this node with a retryable fault (tests of retries). */
  fail_attempts: z.number().int().min(0).max(100).default(0),
  /** Fails with this message, for good: the model refusing the input (tests of non-retryable failures). */
  error: z.string().max(1000).optional(),
});
export const echoFixtureOutput = z.string();

export class EchoFixtureEngine {
  private loaded = new Set<string>();
  /** Attempts seen per prediction (or batch item), for `fail_attempts`. */
  private attempts = new Map<string, number>();

  load(versionId: string): void {
    this.loaded.add(versionId);
  }

  isLoaded(versionId: string): boolean {
    return this.loaded.has(versionId);
  }

  unload(versionId: string): void {
    this.loaded.delete(versionId);
  }

  /**
   * Sleeps (abortably) and echoes; `aborted` when the signal cut the sleep short. `key` names the
   * prediction, so that `fail_attempts` counts its attempts.
   */
  async run(input: z.output<typeof echoFixtureInput>, signal?: AbortSignal, key = ''): Promise<{ output: string; aborted: boolean }> {
    if (input.error !== undefined) throw kilnFailure('ModelError', `echo fixture: ${input.error}`);
    if (input.fail_attempts > 0) {
      const attempt = (this.attempts.get(key) ?? 0) + 1;
      this.attempts.set(key, attempt);
      if (attempt <= input.fail_attempts) throw kilnFailure('EngineFault', `echo fixture: injected fault on attempt ${attempt} of ${key}`);
      this.attempts.delete(key);
    }
    try {
      await sleep(input.sleep_ms, undefined, { signal });
      return { output: input.text, aborted: false };
    } catch (err) {
      if (signal?.aborted) return { output: '', aborted: true };
      throw err;
    }
  }
}
