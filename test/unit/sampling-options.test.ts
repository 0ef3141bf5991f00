/** The options a request's tokens are generated with. */
import type { TokenBias } from 'node-llama-cpp';
import { samplingOptions } from '../../engines/llama/sampling-options';

test("the input's sampling in node-llama-cpp's names, no repeat penalty, stopping quietly on abort", () => {
  const signal = new AbortController().signal;
  const tokenBias = () => ({}) as TokenBias;
  const onToken = () => {};
  const onTextChunk = () => {};
  const options = samplingOptions(
    { temperature: 0, top_p: 0.9, top_k: 40 },
    { maxTokens: 7, seed: 42, signal, tokenBias, onToken, onTextChunk },
  );
  expect(options).toEqual({
    maxTokens: 7,
    temperature: 0,
    topP: 0.9,
    topK: 40,
    seed: 42,
    repeatPenalty: false,
    tokenBias,
    grammar: undefined,
    signal,
    stopOnAbortSignal: true,
    onToken,
    onTextChunk,
  });
  expect(options.tokenBias).toBe(tokenBias);
  expect(options.signal).toBe(signal);
});
