/** The batch workflow's control steps: its projection, and the output assembled from the chunks' parts. */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { batchPartKey, upsertOutputFile, writeBatchSnapshot } from '../db/batches';
import type { Db } from '../db/client';
import type { RerunPlan } from '../domain/batch-contracts';
import { type BatchSnapshot } from '../domain/batch-contracts';
import { FILE_REF_PREFIX, fileKey } from '../lib/file-keys';
import { renderFileRefs } from '../lib/file-urls';
import { idFromKey } from '../lib/ids';
import type { UrlSigner } from '../lib/signing';
import type { Storage } from '../lib/storage';
import { planRerun } from './batch-rerun';
import { currentRunWriter } from './run-writer';

export interface BatchControlDeps {
  db: Db;
  /** Asks which run of a batch is current when another run wrote its row last. */
  temporal?: Client;
  storage: Storage;
  /** Output files of a batch's items (remove-background's PNGs) become links under this API base. */
  baseUrl: string;
  signer: UrlSigner;
}

export interface AssembleRequest {
  batchId: string;
  accountId: string;
  /** Parts in input order: every chunk below `chunksBelow`, then `extraChunks` (a canceled batch's partial ones). */
  chunksBelow: number;
  extraChunks: number[];
  /** Chunks below `chunksBelow` that have no part (a retry's, not run yet). */
  skipChunks?: number[];
}

export interface AssembleResult {
  fileId: string;
  size: number;
  lines: number;
}

/** The output file's id: the same for every attempt, so a retried assembly replaces its file. */
export const batchOutputFileId = (accountId: string, batchId: string): string => idFromKey(accountId, `batch-output:${batchId}`);

export function createBatchControlActivities({ db, temporal, storage, baseUrl, signer }: BatchControlDeps) {
  /**
   * A part's lines with file references made links that need the account's token, not a
   * signature: the output file is kept, and a signed URL in it would expire.
   */
  const withFileLinks = (part: Buffer): Buffer => {
    if (!part.includes(FILE_REF_PREFIX)) return part;
    const lines = part.toString('utf8').split('\n');
    const linked = lines.map((l) =>
      l.includes(FILE_REF_PREFIX)
        ? JSON.stringify(renderFileRefs(JSON.parse(l), baseUrl, signer, (id) => `${baseUrl}/v1/files/${id}/content`))
        : l,
    );
    return Buffer.from(linked.join('\n'));
  };

  return {
    async projectBatch(snapshot: BatchSnapshot): Promise<void> {
      await writeBatchSnapshot(db, snapshot, currentRunWriter(temporal));
    },

    /** What a retry redoes: read from the parts (activities/batch-rerun.ts). */
    async planBatchRerun(req: { batchId: string; total: number; chunkSize: number }): Promise<RerunPlan> {
      const ctx = Context.current();
      return planRerun(storage, req, ctx.cancellationSignal, (done, chunks) => ctx.heartbeat({ parts_read: done, parts: chunks }));
    },

    /** Concatenates the parts, in chunk order, into one JSONL file of the batch's account. */
    async assembleBatchOutput(req: AssembleRequest): Promise<AssembleResult> {
      const ctx = Context.current();
      const fileId = batchOutputFileId(req.accountId, req.batchId);
      const hash = createHash('sha256');
      let size = 0;
      let lines = 0;
      const skip = new Set(req.skipChunks ?? []);
      const below = Array.from({ length: req.chunksBelow }, (_, i) => i).filter((c) => !skip.has(c));
      const order = [...below, ...[...req.extraChunks].sort((a, b) => a - b)];
      async function* parts() {
        for (const [n, chunk] of order.entries()) {
          // A part holds one chunk's lines: small enough to read whole.
          const pieces: Buffer[] = [];
          for await (const piece of await storage.read(batchPartKey(req.batchId, chunk), { signal: ctx.cancellationSignal }))
            pieces.push(piece as Buffer);
          const b = withFileLinks(Buffer.concat(pieces));
          hash.update(b);
          size += b.length;
          for (const byte of b) if (byte === 10) lines += 1;
          ctx.heartbeat({ parts_done: n + 1, parts: order.length });
          yield b;
        }
      }
      await storage.putStream(fileKey(fileId), Readable.from(parts()));
      await upsertOutputFile(db, {
        id: fileId,
        accountId: req.accountId,
        name: `batch-${req.batchId}.jsonl`,
        contentType: 'application/jsonl',
        size,
        sha256: hash.digest('hex'),
      });
      return { fileId, size, lines };
    },
  };
}
