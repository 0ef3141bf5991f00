/** A generation's stream: tokens counted within max_tokens, text cleaned and cut at a stop string. */
import type { Token } from 'node-llama-cpp';
import { GenerationStream, type StreamSettings } from '../../engines/llama/generation-stream';

const t = (...ids: number[]) => ids as Token[];

function streamOf(settings: Partial<StreamSettings> = {}) {
  const calls: string[] = [];
  const told: Array<[string, number]> = [];
  const stream = new GenerationStream(
    {
      continues: '',
      continuedTokens: 0,
      maxTokens: 10,
      stops: [],
      detokenize: (tokens) => tokens.map((x) => `<${x}>`).join(''),
      ...settings,
    },
    {
      onChunk: (chunk, outputTokens) => told.push([chunk, outputTokens]),
      onLastToken: () => calls.push('last'),
      onStop: () => calls.push('stop'),
    },
  );
  return { stream, calls, told };
}

test('chunks stream as they come, each told with the output tokens so far', () => {
  const { stream, told, calls } = streamOf();
  stream.countTokens(t(1));
  stream.takeText('Hello');
  stream.countTokens(t(2, 3));
  stream.takeText(' world');
  expect(stream.chunks).toEqual(['Hello', ' world']);
  expect(told).toEqual([
    ['Hello', 1],
    [' world', 3],
  ]);
  expect(stream.outputTokens).toBe(3);
  expect(stream.text).toBe('Hello world');
  expect(stream.stopped).toBe(false);
  expect(stream.firstChunkAt).not.toBeNull();
  expect(calls).toEqual([]);
});

test('a continued text counts as output and is matched for a stop string that ends after it, but is no chunk', () => {
  const { stream, calls } = streamOf({ continues: 'Answer: EN', continuedTokens: 4, stops: ['END'] });
  expect(stream.outputTokens).toBe(4);
  stream.countTokens(t(1));
  stream.takeText('D. Then');
  expect(stream.chunks).toEqual([]);
  expect(stream.stopped).toBe(true);
  expect(calls).toEqual(['stop']);
});

test('a stop string split across chunks: the chunk that completes it keeps nothing, and later chunks are dropped', () => {
  const { stream, calls } = streamOf({ stops: ['</s>'] });
  stream.takeText('one </');
  stream.takeText('s> two');
  stream.takeText(' three');
  expect(stream.chunks).toEqual(['one </']);
  expect(calls).toEqual(['stop']);
  // The text holds what was taken up to the stop, the stop string's chunk whole: nothing after.
  expect(stream.text).toBe('one </s> two');
});

test('a stop string at the very start stops with no chunk at all', () => {
  const { stream, calls, told } = streamOf({ stops: ['\n'] });
  stream.takeText('\nmore');
  expect(stream.chunks).toEqual([]);
  expect(told).toEqual([]);
  expect(calls).toEqual(['stop']);
  // The chunk came, though nothing of it is output: the first-token time counts it.
  expect(stream.firstChunkAt).not.toBeNull();
});

test('of several stop strings the earliest in the text wins', () => {
  const { stream } = streamOf({ stops: ['C', 'B'] });
  stream.takeText('aaB bbC');
  expect(stream.chunks).toEqual(['aa']);
});

test('empty chunks and replacement characters are dropped, and do not start the first-token clock', () => {
  const { stream, told } = streamOf();
  stream.takeText('');
  stream.takeText('\uFFFD\u0000');
  expect(stream.firstChunkAt).toBeNull();
  stream.takeText('a\uFFFDb');
  expect(told).toEqual([['ab', 0]]);
});

test('tokens past max_tokens are not counted, and the chunk is the kept tokens only', () => {
  const { stream, calls, told } = streamOf({ maxTokens: 3 });
  stream.countTokens(t(1));
  stream.takeText('x');
  expect(calls).toEqual([]);
  stream.countTokens(t(2, 3, 4));
  expect(stream.outputTokens).toBe(3);
  expect(calls).toEqual(['last']);
  stream.takeText('decoded whole');
  expect(told).toEqual([
    ['x', 1],
    ['<2><3>', 3],
  ]);
  // Nothing is left to keep: a token drawn past max_tokens gives an empty chunk.
  stream.countTokens(t(5));
  stream.takeText('more');
  expect(stream.chunks).toEqual(['x', '<2><3>']);
  expect(stream.outputTokens).toBe(3);
});

test('reaching max_tokens exactly tells the last token; a clip applies to the next chunk only', () => {
  const { stream, calls, told } = streamOf({ maxTokens: 2 });
  stream.countTokens(t(1, 2));
  expect(calls).toEqual(['last']);
  stream.takeText('ab');
  expect(told).toEqual([['ab', 2]]);
});

test("a held stop string's beginning waits, by whole chunks, until the text goes on otherwise; the whole one stops it unseen", () => {
  const { stream, told, calls } = streamOf({ heldStops: ['\n### Human'] });
  stream.countTokens(t(1));
  stream.takeText('Fine.');
  stream.countTokens(t(2));
  stream.takeText('\n');
  stream.countTokens(t(3));
  stream.takeText('##');
  expect(told).toEqual([['Fine.', 1]]);
  stream.countTokens(t(4));
  stream.takeText(' Next');
  expect(told).toEqual([
    ['Fine.', 1],
    ['\n## Next', 4],
  ]);
  stream.countTokens(t(5));
  stream.takeText('\n### Hu');
  stream.countTokens(t(6));
  stream.takeText('man: more');
  expect(stream.chunks.join('')).toBe('Fine.\n## Next');
  expect(stream.stopped).toBe(true);
  expect(calls).toEqual(['stop']);
  stream.flush();
  expect(stream.chunks.join('')).toBe('Fine.\n## Next');
});

test('text held at the end of the generation goes out when it is flushed', () => {
  const { stream, told } = streamOf({ heldStops: ['<end>'] });
  stream.countTokens(t(1, 2));
  stream.takeText('a <en');
  expect(told).toEqual([]);
  stream.flush();
  expect(told).toEqual([['a <en', 2]]);
});
