/** Embeddings as Kiln predictions: the input texts become an embeddings input, the vectors OpenAI's list. */
import type { PredictionRow } from '../../db/predictions';
import { figure } from '../../domain/prediction-metrics';
import { BadRequestError } from '../errors';
import type { EmbeddingList, EmbeddingsRequest } from './protocol';

export function embeddingsInput(body: EmbeddingsRequest): Record<string, unknown> {
  return { text: body.input };
}

/** A vector as OpenAI's `base64` format sends it: little-endian float32s. */
export function base64Vector(v: number[]): string {
  return Buffer.from(new Float32Array(v).buffer).toString('base64');
}

/** The vectors in OpenAI's list; a `dimensions` other than the model's is a 400, since Kiln does not shorten vectors. */
export function embeddingList(body: EmbeddingsRequest, done: Pick<PredictionRow, 'output' | 'metrics'>): EmbeddingList {
  const vectors = (done.output as number[][]) ?? [];
  if (body.dimensions !== undefined && body.dimensions !== vectors[0]?.length) {
    throw new BadRequestError(`This model makes ${vectors[0]?.length}-dimensional vectors; dimensions cannot change that`);
  }
  const encode = (v: number[]) => (body.encoding_format === 'base64' ? base64Vector(v) : v);
  const tokens = figure(done.metrics, 'input_token_count') ?? 0;
  return {
    object: 'list',
    data: vectors.map((v, index) => ({ object: 'embedding', index, embedding: encode(v) })),
    model: body.model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}
