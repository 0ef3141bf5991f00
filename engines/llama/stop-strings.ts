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
 * Where the stop string that begins first begins in `text`, among those that end after `from` (the
 * text before it was looked at already); -1 where none does.
 */
export function firstStopAt(text: string, from: number, stops: readonly string[]): number {
  const hits = stops.map((s) => text.indexOf(s, Math.max(0, from - s.length + 1))).filter((i) => i >= 0);
  return hits.length === 0 ? -1 : Math.min(...hits);
}

/**
 * What of `chunk` is output, `streamed` being the text before it: all of it where no stop string
 * ends in it; else what comes before the stop string that begins first (it may have begun in
 * `streamed`, so nothing of the chunk is left), and the stream stops there.
 */
export function cutAtStop(streamed: string, chunk: string, stops: readonly string[]): { keep: string; stopped: boolean } {
  const at = firstStopAt(streamed + chunk, streamed.length, stops);
  if (at < 0) return { keep: chunk, stopped: false };
  const keep = at - streamed.length;
  return { keep: keep > 0 ? chunk.slice(0, keep) : '', stopped: true };
}

/** Whether `text` ends with the beginning of one of `stops` (a proper beginning: the whole would have stopped it). */
export function endsInStopBeginning(text: string, stops: readonly string[]): boolean {
  return stops.some((stop) => {
    for (let n = Math.min(stop.length - 1, text.length); n > 0; n--) if (text.endsWith(stop.slice(0, n))) return true;
    return false;
  });
}
