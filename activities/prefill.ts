/**
 * Prefill/decode split, prefill side: a `prefill` node evaluates a long prompt and puts its KV
 * snapshot in the object tier; the decode node's predict restores it (domain/prefill-split.ts).
 */
import { Context } from '@temporalio/activity';
import type { PrefillRequest, PrefillResult } from '../domain/contracts';
import type { TextGenerationInput } from '../domain/tasks/text-generation';
import type { EngineDeps } from './engine-deps';
import { mappingEngineErrors } from './engine-failures';
import { round } from './figures';

/** How often a prefill heartbeats: a node that died is noticed by its heartbeat timeout, not the prefill's. */
const HEARTBEAT_MS = 1_000;

export function createPrefillActivities(deps: Pick<EngineDeps, 'llama' | 'node'>) {
  return {
    prefill: mappingEngineErrors(async (req: PrefillRequest): Promise<PrefillResult> => {
      const ctx = Context.current();
      const nodeId = deps.node.nodeId;
      const beat = setInterval(() => ctx.heartbeat({ nodeId }), HEARTBEAT_MS);
      const done = deps.node.begin(req.versionId);
      try {
        const input = req.input as Pick<TextGenerationInput, 'prompt' | 'messages'>;
        const r = await deps.llama.prefill(req.versionId, input, { owner: req.owner, signal: ctx.cancellationSignal });
        return {
          nodeId,
          snapshot: r.snapshot?.name ?? null,
          tokens: r.tokens,
          bytes: r.snapshot?.bytes ?? 0,
          waitSeconds: round(r.waitSeconds),
          prefillSeconds: round(r.prefillSeconds),
          uploadSeconds: round(r.uploadSeconds),
        };
      } finally {
        done();
        clearInterval(beat);
      }
    }),
  };
}
