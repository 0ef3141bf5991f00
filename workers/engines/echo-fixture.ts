/**
 * A test fixture, not an engine: it "runs" a prediction by sleeping for the time asked and
 * echoing the text back. It lets benchmarks of the orchestration (fair queuing, overhead,
 * sustained load) control the service time exactly. It is only served when
 * KILN_ENABLE_FIXTURES is on, and its model is named kiln/echo-fixture.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';

export const echoFixtureInput = z.strictObject({
  text: z.string().max(10_000).default(''),
  sleep_ms: z.number().int().min(0).max(600_000).default(0),
});
export const echoFixtureOutput = z.string();

export class EchoFixtureEngine {
  private loaded = new Set<string>();

  load(versionId: string): void {
    this.loaded.add(versionId);
  }

  isLoaded(versionId: string): boolean {
    return this.loaded.has(versionId);
  }

  unload(versionId: string): void {
    this.loaded.delete(versionId);
  }

  /** Sleeps (abortably) and echoes; `aborted` when the signal cut the sleep short. */
  async run(input: z.output<typeof echoFixtureInput>, signal?: AbortSignal): Promise<{ output: string; aborted: boolean }> {
    try {
      await sleep(input.sleep_ms, undefined, { signal });
      return { output: input.text, aborted: false };
    } catch (err) {
      if (signal?.aborted) return { output: '', aborted: true };
      throw err;
    }
  }
}
