/** The token budget: max_tokens and min_tokens against the context, and what is drawn past max_tokens. */
import type { Token } from 'node-llama-cpp';
import { EngineError } from '../../engines/engine-error';
import { contextLimits, contextShiftSize, tokensLeft, withinMaxTokens } from '../../engines/llama/token-budget';

const prompt = { prompt: 'p', messages: undefined };

test('max_tokens is kept where the context has room for it', () => {
  expect(contextLimits({ ...prompt, max_tokens: 100, min_tokens: 10 }, 50, 2048)).toEqual({ max_tokens: 100, min_tokens: 10 });
});

test('max_tokens is capped by the room the prompt leaves in the context, and min_tokens with it', () => {
  expect(contextLimits({ ...prompt, max_tokens: 100, min_tokens: 10 }, 60, 64)).toEqual({ max_tokens: 4, min_tokens: 4 });
  expect(contextLimits({ ...prompt, max_tokens: 100, min_tokens: 2 }, 60, 64)).toEqual({ max_tokens: 4, min_tokens: 2 });
});

test('min_tokens over max_tokens is lowered to max_tokens, not an error', () => {
  expect(contextLimits({ ...prompt, max_tokens: 20, min_tokens: 50 }, 10, 2048)).toEqual({ max_tokens: 20, min_tokens: 20 });
});

test('a prompt that leaves exactly one token generates one', () => {
  expect(contextLimits({ ...prompt, max_tokens: 100, min_tokens: 0 }, 63, 64)).toEqual({ max_tokens: 1, min_tokens: 0 });
});

test('a prompt that fills the context fails non-retryably, naming the field', () => {
  const fail = (input: Parameters<typeof contextLimits>[0]) => {
    try {
      contextLimits(input, 64, 64);
    } catch (err) {
      return err;
    }
    throw new Error('no error');
  };
  const err = fail({ ...prompt, max_tokens: 10, min_tokens: 0 }) as EngineError;
  expect(err).toBeInstanceOf(EngineError);
  expect(err.type).toBe('ContextLengthExceeded');
  expect(err.message).toBe(
    "input.prompt: the prompt is 64 tokens, more than the model's context of 64 tokens leaves room for (at least one token must be generated)",
  );
  const chat = fail({ prompt: undefined, messages: [{ role: 'user', content: 'x' }], max_tokens: 10, min_tokens: 0 }) as EngineError;
  expect(chat.message).toMatch(/^input\.messages: the messages are 64 tokens/);
});

test('tokens left: the continued text counts towards max_tokens', () => {
  expect(tokensLeft({ max_tokens: 10, min_tokens: 0 }, 0)).toBe(10);
  expect(tokensLeft({ max_tokens: 10, min_tokens: 0 }, 7)).toBe(3);
  expect(tokensLeft({ max_tokens: 10, min_tokens: 0 }, 10)).toBe(0);
  expect(tokensLeft({ max_tokens: 10, min_tokens: 0 }, 12)).toBe(-2);
});

test('tokens within max_tokens are all counted; those past it are cut off', () => {
  const t = (...ids: number[]) => ids as Token[];
  expect(withinMaxTokens(t(1, 2), 5, 10)).toEqual({ counted: 2 });
  expect(withinMaxTokens(t(1, 2), 8, 10)).toEqual({ counted: 2 });
  // node-llama-cpp drew one past max_tokens (a token held mid-character): only the room is kept.
  expect(withinMaxTokens(t(1, 2, 3), 8, 10)).toEqual({ counted: 2, kept: t(1, 2) });
  expect(withinMaxTokens(t(4), 10, 10)).toEqual({ counted: 0, kept: [] });
});

test('the context shift is a tenth of the context, or the room the prompt leaves where that is less, and at least 1', () => {
  expect(contextShiftSize(2048, 100)).toBe(204);
  expect(contextShiftSize(2048, 1900)).toBe(148);
  expect(contextShiftSize(2048, 2048)).toBe(1);
  expect(contextShiftSize(5, 0)).toBe(1);
});
