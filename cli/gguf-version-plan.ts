/**
 * What a pulled GGUF becomes, read from its metadata: the task (an embedding model pools its token
 * states, a causal one generates), the context a version gets (the trained one, capped) and
 * whether it carries its own chat template (the engine renders `tokenizer.chat_template`).
 */
import type { GgufScalar } from '../lib/gguf-metadata';
import { KilnError } from '../lib/kiln-error';

export class GgufPlanError extends KilnError {}

export interface GgufVersionPlan {
  task: 'text-generation' | 'embeddings';
  architecture: string;
  /** The version's `settings.contextSize`; absent where the file names no trained context the API takes. */
  contextSize?: number;
  trainedContext?: number;
  chatTemplate: boolean;
  /** Why that task, in a few words, for the pull's summary line. */
  because: string;
}

/** Encoder-only architectures of llama.cpp: they embed, they never generate. */
const ENCODERS = new Set(['bert', 'nomic-bert', 'nomic-bert-moe', 'jina-bert-v2', 'jina-bert-v3', 'modern-bert', 'neo-bert', 't5encoder']);
/** llama.cpp's `enum llama_pooling_type`. */
const POOLING = ['none', 'mean', 'cls', 'last', 'rank'] as const;
/** The smallest `settings.contextSize` the API takes. */
const MIN_CONTEXT = 256;

const numberOf = (v: GgufScalar | undefined) => (typeof v === 'number' || typeof v === 'bigint' ? Number(v) : undefined);

export function ggufVersionPlan(metadata: Map<string, GgufScalar>, maxContextSize: number): GgufVersionPlan {
  const architecture = metadata.get('general.architecture');
  if (typeof architecture !== 'string' || architecture === '') throw new GgufPlanError('the GGUF names no general.architecture');
  if (metadata.has('adapter.type')) throw new GgufPlanError('the GGUF is a LoRA adapter: push it with `kiln push --lora-for owner/base`');
  const poolingCode = numberOf(metadata.get(`${architecture}.pooling_type`));
  const pooling = poolingCode === undefined ? undefined : POOLING[poolingCode];
  if (pooling === 'rank') throw new GgufPlanError(`the GGUF is a reranker (${architecture}.pooling_type rank): no Kiln task serves one`);
  const template = metadata.get('tokenizer.chat_template');
  const chatTemplate = typeof template === 'string' && template.trim() !== '';
  const trainedContext = numberOf(metadata.get(`${architecture}.context_length`));
  const contextSize =
    trainedContext !== undefined && trainedContext >= MIN_CONTEXT
      ? Math.max(MIN_CONTEXT, Math.min(trainedContext, maxContextSize))
      : undefined;
  const embeds = ENCODERS.has(architecture) || (pooling !== undefined && pooling !== 'none');
  return {
    task: embeds ? 'embeddings' : 'text-generation',
    architecture,
    contextSize,
    trainedContext,
    chatTemplate,
    because: embeds
      ? ENCODERS.has(architecture)
        ? `${architecture} is an encoder`
        : `it pools its token states (${pooling})`
      : chatTemplate
        ? 'a causal model with its own chat template'
        : 'a causal model without a chat template (prompts; chats use a wrapper chosen by architecture)',
  };
}
