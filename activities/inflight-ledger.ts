/**
 * The predict activities an engine process is running, kept in a file beside it, so that the
 * process that replaces a killed one (the supervisor restarts it in about a second) can fail
 * them at once instead of leaving each workflow to wait out its heartbeat timeout. A lost
 * activity failed this way is an `EngineInterrupted` fault: the workflow places it again and the
 * next attempt continues the output streamed so far.
 */
import { ApplicationFailure } from '@temporalio/common';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';

export interface LostActivity {
  /** The activity's task token, base64. */
  taskToken: string;
  predictionId: string;
  startedAt: string;
}

/** What fails a lost activity by its task token (Temporal's AsyncCompletionClient.fail). */
export type FailActivity = (taskToken: Uint8Array, failure: ApplicationFailure) => Promise<void>;

export class InflightLedger {
  private readonly running = new Map<string, LostActivity>();
  /** One write at a time; a change made meanwhile is written by the next. */
  private writing: Promise<void> = Promise.resolve();
  private dirty = false;

  constructor(
    private readonly file: string,
    private readonly nodeId: string,
  ) {}

  /** Records a running activity; the returned function forgets it when the activity ends. */
  track(taskToken: Uint8Array, predictionId: string): () => void {
    const key = Buffer.from(taskToken).toString('base64');
    this.running.set(key, { taskToken: key, predictionId, startedAt: new Date().toISOString() });
    this.save();
    return () => {
      this.running.delete(key);
      this.save();
    };
  }

  /** Resolves once what is tracked now is on disk. */
  flushed(): Promise<void> {
    return this.writing;
  }

  private save(): void {
    if (this.dirty) return;
    this.dirty = true;
    this.writing = this.writing.then(async () => {
      this.dirty = false;
      const tmp = `${this.file}.tmp`;
      await writeFile(tmp, JSON.stringify([...this.running.values()]));
      await rename(tmp, this.file);
    });
    // A failed write leaves the last good file; the next change tries again.
    this.writing = this.writing.catch(() => undefined);
  }

  /**
   * At start, before taking work: fails what the previous process of this node left running,
   * then clears the record. Returns what was reported; an activity that had finished meanwhile
   * (Temporal no longer knows its token) is skipped.
   */
  async reportLost(fail: FailActivity): Promise<LostActivity[]> {
    await mkdir(path.dirname(this.file), { recursive: true });
    let lost: LostActivity[] = [];
    try {
      lost = JSON.parse(await readFile(this.file, 'utf8')) as LostActivity[];
    } catch {
      lost = [];
    }
    const reported: LostActivity[] = [];
    for (const activity of lost) {
      const failure = ApplicationFailure.retryable(
        `the engine process on node ${this.nodeId} stopped while it ran (reported by its restart)`,
        'EngineInterrupted',
        { nodeId: this.nodeId },
      );
      try {
        await fail(Buffer.from(activity.taskToken, 'base64'), failure);
        reported.push(activity);
      } catch {
        // Finished, timed out or already retried: nothing is waiting on it.
      }
    }
    await writeFile(this.file, '[]');
    return reported;
  }
}
