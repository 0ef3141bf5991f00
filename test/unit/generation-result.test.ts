/** The one result of a generation, whichever way it ended. */
import {
  cacheTierOf,
  endedByDecoding,
  endedByEarlyAbort,
  type GenerationRun,
  generationOutput,
  generationResult,
  nothingToGenerate,
} from '../../engines/llama/generation-result';

const counts = { inputTokens: 12, continuedTokens: 0, seed: 7 };
const output = { chunks: ['a', 'b'], outputTokens: 2, cachedTokens: 5 };
const times = { started: 1000, ended: 3500 };

test('a generation that ran: its timings in seconds, its fields in a fixed order', () => {
  const run: GenerationRun = {
    output,
    ending: endedByDecoding({ ...times, stopReason: 'eogToken', atStopString: false, canceled: false, firstChunkAt: 1250 }),
  };
  const result = generationResult(counts, run);
  expect(JSON.stringify(result)).toBe(
    JSON.stringify({
      chunks: ['a', 'b'],
      inputTokens: 12,
      outputTokens: 2,
      continuedTokens: 0,
      cachedTokens: 5,
      cacheTier: 'live',
      aborted: false,
      stopReason: 'eogToken',
      seed: 7,
      timeToFirstToken: 0.25,
      predictSeconds: 2.5,
    }),
  );
  expect('draft' in result).toBe(false);
});

test('a stop string ends as stop; a cancel wins over it and keeps llama.cpp reason', () => {
  expect(endedByDecoding({ ...times, stopReason: 'abort', atStopString: true, canceled: false, firstChunkAt: null }).stopReason).toBe(
    'stop',
  );
  const canceled = endedByDecoding({ ...times, stopReason: 'abort', atStopString: true, canceled: true, firstChunkAt: null });
  expect(canceled).toMatchObject({ stopReason: 'abort', aborted: true, timeToFirstToken: null });
  expect(endedByDecoding({ ...times, stopReason: 'maxTokens', atStopString: false, canceled: true, firstChunkAt: 1100 })).toMatchObject({
    stopReason: 'maxTokens',
    aborted: true,
  });
});

test('draft counts are kept where the version decodes speculatively', () => {
  const ending = endedByDecoding({
    ...times,
    stopReason: 'maxTokens',
    atStopString: false,
    canceled: false,
    firstChunkAt: 1000,
    draft: { accepted: 3, rejected: 1 },
  });
  expect(generationResult(counts, { output, ending }).draft).toEqual({ accepted: 3, rejected: 1 });
  expect(Object.keys(generationResult(counts, { output, ending })).at(-1)).toBe('draft');
});

test('an abort before the first token: canceled is abort, a stop string stop, and no first-token time', () => {
  expect(endedByEarlyAbort({ ...times, canceled: true })).toEqual({
    aborted: true,
    stopReason: 'abort',
    timeToFirstToken: null,
    predictSeconds: 2.5,
  });
  expect(endedByEarlyAbort({ ...times, canceled: false })).toEqual({
    aborted: false,
    stopReason: 'stop',
    timeToFirstToken: null,
    predictSeconds: 2.5,
  });
});

test('a continued text that fills max_tokens: no chunks, its tokens as output, no time spent', () => {
  expect(generationResult({ ...counts, continuedTokens: 9 }, nothingToGenerate(9))).toEqual({
    chunks: [],
    inputTokens: 12,
    outputTokens: 9,
    continuedTokens: 9,
    cachedTokens: 0,
    cacheTier: 'none',
    aborted: false,
    stopReason: 'maxTokens',
    seed: 7,
    timeToFirstToken: null,
    predictSeconds: 0,
  });
});

test('the cache tier: a restore names its tier, tokens a sequence held are live, none otherwise', () => {
  expect(cacheTierOf(0)).toBe('none');
  expect(cacheTierOf(40)).toBe('live');
  expect(cacheTierOf(40, { tier: 'disk' })).toBe('disk');
  expect(cacheTierOf(40, { tier: 'object' })).toBe('object');
});

test("a generation's output names a restore, a resume and checkpoints only where there were any", () => {
  const none = { saved: 0, seconds: 0 };
  expect(generationOutput({ chunks: ['a'], outputTokens: 1, checkpoints: none })).toEqual({
    chunks: ['a'],
    outputTokens: 1,
    cachedTokens: 0,
  });
  const restored = { name: 's', tokens: 40, seconds: 0.1, tier: 'disk' as const, bytes: 1024 };
  const resumed = { from: 'checkpoint' as const, tier: 'disk' as const, atToken: 64, seconds: 0.2, redrawn: 3, matched: true };
  const checkpoints = { saved: 2, seconds: 0.5 };
  const output = generationOutput({ chunks: [], outputTokens: 9, cachedTokens: 40, restored, resumed, checkpoints });
  expect(output).toEqual({ chunks: [], outputTokens: 9, cachedTokens: 40, restored, resumed, checkpoints });
  expect(Object.keys(output)).toEqual(['chunks', 'outputTokens', 'cachedTokens', 'resumed', 'checkpoints', 'restored']);
});
