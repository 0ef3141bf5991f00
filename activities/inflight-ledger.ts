/**
 * The predict activities an engine process is running, kept in a file beside it, so that the
 * process that replaces a killed one (the supervisor restarts it in about a second) can fail
 * them at once instead of leaving each workflow to wait out its heartbeat timeout. A lost
 * activity failed this way is an `EngineInterrupted` fault: the workflow places it again and the
 * next attempt continues the output streamed so far.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';

export interface LostActivity {
  /** The activity's task token, base64. */
  taskToken: string;
  predictionId: string;
  startedAt: string;
}

/** What fails a lost activity by its task token (Temporal's AsyncCompletionClient.fail). */
export type FailActivity = (taskToken: Uint8Array, failure: ApplicationFailure) => Promise<void>;

/**
 * How long an activity runs before it is written down. One lost sooner fails by its heartbeat
 * timeout instead (2 s, workflows/prediction.ts), barely later than a restart would report it;
 * a short prediction, most of them, then costs the ledger no file write at all.
 */
export const RECORD_AFTER_MS = 500;

export class InflightLedger {
  private readonly running = new Map<string, LostActivity>();
  /** The keys the last write put on disk: forgetting one of them needs a write, forgetting any other does not. */
  private onDisk = new Set<string>();
  /** One write at a time; a change made meanwhile is written by the next. */
  private writing: Promise<void> = Promise.resolve();
  private dirty = false;

  constructor(
    private readonly file: string,
    private readonly nodeId: string,
    private readonly recordAfterMs = RECORD_AFTER_MS,
  ) {}

  /** Records a running activity (on disk once it has run `recordAfterMs`); the returned function forgets it when the activity ends. */
  track(taskToken: Uint8Array, predictionId: string): () => void {
    const key = Buffer.from(taskToken).toString('base64');
    this.running.set(key, { taskToken: key, predictionId, startedAt: new Date().toISOString() });
    const record = setTimeout(() => this.save(), this.recordAfterMs);
    record.unref();
    return () => {
      clearTimeout(record);
      this.running.delete(key);
      if (this.onDisk.has(key)) this.save();
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
      const running = [...this.running.values()];
      this.onDisk = new Set(running.map((a) => a.taskToken));
      await writeFile(tmp, JSON.stringify(running));
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
