/** How a prediction's output events and its end become the chunks of one endpoint's stream. */
import type { PredictionRow } from '../../db/predictions';
import type { FinishReason, Tool, Usage } from './protocol';
import { finishReason, type Limit } from './result';
import { isUnfinishedCall, mayBeToolCall, parseToolCalls, type ToolMode } from './tools';

/** One streamed object: `chat.completion.chunk` or `text_completion`. */
export interface Chunk {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: unknown[];
}

/** The endpoint's chunk carrying a text delta (none: `null`) and a finish reason (none yet: `null`). */
export type ChunkOf = (delta: string | null, finish: FinishReason | null) => Chunk;

export interface StreamShape {
  chunk: ChunkOf;
  /** Sent as the stream opens, before any text (a chat's names the assistant's role). */
  first?: Chunk;
  /** The chunks an output event becomes (none while text is held back). */
  text(data: string): Chunk[];
  /** The chunks that end the answer of a prediction that succeeded. */
  end(done: Pick<PredictionRow, 'metrics'>): Chunk[];
}

/** Text deltas as they come, then the finish reason. */
export function textShape(chunk: ChunkOf, limit: Limit, first?: Chunk): StreamShape {
  return { chunk, first, text: (data) => [chunk(data, null)], end: (done) => [chunk(null, finishReason(done, limit))] };
}

/**
 * A chat's stream where the answer may be tool calls: a forced call is held back whole and sent as
 * one `tool_calls` delta; an `auto` answer is held only while it could still be a call (it starts
 * with `{` or `[`), and streams as text from the moment it cannot.
 */
export function toolCallShape(
  chunk: ChunkOf,
  limit: Limit,
  calls: { mode: Exclude<ToolMode, 'none'>; tools: Tool[]; idPrefix: string },
  first?: Chunk,
): StreamShape {
  let held = '';
  let holding = true;
  return {
    chunk,
    first,
    text(data) {
      if (!holding) return [chunk(data, null)];
      held += data;
      if (calls.mode === 'forced' || mayBeToolCall(held)) return [];
      holding = false;
      return [chunk(held, null)];
    },
    end(done) {
      const parsed = holding ? parseToolCalls(held.trim(), calls.tools, calls.idPrefix) : undefined;
      if (parsed) {
        const delta = { tool_calls: parsed.map((c, index) => ({ index, ...c })) };
        return [{ ...chunk(null, null), choices: [{ index: 0, delta, finish_reason: null, logprobs: null }] }, chunk(null, 'tool_calls')];
      }
      const finish = finishReason(done, limit);
      const text = holding && held && !isUnfinishedCall(held, calls.mode, finish) ? [chunk(held, null)] : [];
      return [...text, chunk(null, finish)];
    },
  };
}

/** The last chunk when the client asked for usage: no choices, the prediction's token counts. */
export function usageChunk(shape: StreamShape, usage: Usage): Chunk & { usage: Usage } {
  return { ...shape.chunk(null, null), choices: [], usage };
}
