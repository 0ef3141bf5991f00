/** Embeddings: one vector per text, from the version's llama.cpp model. */
import type { EmbeddingsInput } from '../domain/tasks/embeddings';
import { round } from './figures';
import type { TaskRunner } from './task-run';

export const runEmbeddings: TaskRunner<EmbeddingsInput> = async ({ req, input, ctx, startedAt, queueSeconds, deps }) => {
  const texts = [input.text].flat();
  const t0 = performance.now();
  const { vectors, tokens } = await deps.llama.embed(req.versionId, texts, ctx.cancellationSignal);
  const seconds = (performance.now() - t0) / 1000;
  return {
    output: vectors,
    logs: [`Embedded ${texts.length} text(s), ${tokens} tokens, in ${seconds.toFixed(3)} s`],
    metrics: { predict_time: round(seconds), input_token_count: tokens, queue_time: round(queueSeconds) },
    startedAt,
    aborted: false,
    hardware: deps.node.hardware,
  };
};
