/**
 * Stop strings, matched on the decoded text as it streams: llama.cpp's detector misses a string
 * that begins with a space, since a word token carries its space as a prefix.
 */
import type { TextGenerationInput } from '../../domain/tasks/text-generation';

/** The request's stop strings as a list (none, one or several). */
export function stopStringsOf(stop: TextGenerationInput['stop']): string[] {
  return stop === undefined ? [] : [stop].flat();
}

/**
 * What of `chunk` is output, `streamed` being the text before it: all of it where no stop string
 * ends in it; else what comes before the stop string that begins first (it may have begun in
 * `streamed`, so nothing of the chunk is left), and the stream stops there.
 */
export function cutAtStop(streamed: string, chunk: string, stops: readonly string[]): { keep: string; stopped: boolean } {
  const before = streamed.length;
  const text = streamed + chunk;
  const hits = stops.map((s) => text.indexOf(s, Math.max(0, before - s.length + 1))).filter((i) => i >= 0);
  if (hits.length === 0) return { keep: chunk, stopped: false };
  const keep = Math.min(...hits) - before;
  return { keep: keep > 0 ? chunk.slice(0, keep) : '', stopped: true };
}
