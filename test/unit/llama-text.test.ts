/** What generated text may hold: no replacement characters and no NUL, every whole character kept. */
import { cleanText } from '../../engines/llama/text';

test('lone bytes (U+FFFD) and NUL bytes are dropped; whole characters, emoji and newlines stay', () => {
  expect(cleanText('at\u0000 on')).toBe('at on');
  expect(cleanText('a\uFFFDb\uFFFD')).toBe('ab');
  expect(cleanText('ન star 🌙\nnext\tline')).toBe('ન star 🌙\nnext\tline');
});
