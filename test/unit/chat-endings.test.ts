/** Which chats exact decoding can end as LlamaChat does, the stop texts it adds, and the answer's trimmed start. */
import type { Token } from 'node-llama-cpp';
import { chatEndingsOf, StartTrim } from '../../engines/llama/chat-endings';

const END = 2 as Token;
const START_OF_TURN = 5 as Token;
const isEnd = (t: Token) => t === END;
const plain = { stops: [], ignoredAtStart: [], needsLlamaChat: false };

describe('chat endings', () => {
  test('a trigger that begins with an end token needs nothing; one of text alone becomes a stop string', () => {
    const endings = chatEndingsOf({ ...plain, stops: [[END], [END, '\n'], ['\n### User', ':']], ignoredAtStart: [[' '], ['\t']] }, isEnd);
    expect(endings).toEqual({ stops: ['\n### User:'], ignoredAtStart: [' ', '\t'] });
  });

  test('a trigger with a special token that does not end generation keeps the chat on LlamaChat', () => {
    expect(chatEndingsOf({ ...plain, stops: [[START_OF_TURN, 'user']] }, isEnd)).toBeUndefined();
    expect(chatEndingsOf({ ...plain, stops: [['\n', END]] }, isEnd)).toBeUndefined();
    expect(chatEndingsOf({ ...plain, ignoredAtStart: [[START_OF_TURN]] }, isEnd)).toBeUndefined();
  });

  test('segments, prefix triggers and the like keep the chat on LlamaChat', () => {
    expect(chatEndingsOf({ ...plain, stops: [[END]], needsLlamaChat: true }, isEnd)).toBeUndefined();
  });
});

describe('the start of the answer', () => {
  const ignored = [' ', '  ', '   ', '    ', '\t', '\t\t', '\t ', ' \t'];
  const trimmed = (chunks: string[]) => {
    const trim = new StartTrim(ignored);
    return chunks.map((c) => trim.take(c));
  };

  test('the longest ignored text it begins with is dropped, once', () => {
    expect(trimmed([' Hello', ' world'])).toEqual(['Hello', ' world']);
    expect(trimmed(['  ', ' x', ' y'])).toEqual(['', 'x', ' y']);
    expect(trimmed(['      x'])).toEqual(['  x']);
    expect(trimmed(['\t', ' ', 'x'])).toEqual(['', '', 'x']);
  });

  test('text with no ignored start goes through untouched', () => {
    expect(trimmed(['Hi', ' '])).toEqual(['Hi', ' ']);
    expect(new StartTrim([]).take('  x')).toBe('  x');
  });
});
