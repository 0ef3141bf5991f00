/** Chat messages as node-llama-cpp's chat history, ending with the model's (maybe begun) turn. */
import { toChatHistory } from '../../engines/llama/chat-history';

const messages = [
  { role: 'system' as const, content: 'Be brief.' },
  { role: 'user' as const, content: 'Hi' },
  { role: 'assistant' as const, content: 'Hello.' },
  { role: 'user' as const, content: 'Count.' },
];

test('each role maps to its item, and an empty model turn ends the history', () => {
  expect(toChatHistory(messages)).toEqual([
    { type: 'system', text: 'Be brief.' },
    { type: 'user', text: 'Hi' },
    { type: 'model', response: ['Hello.'] },
    { type: 'user', text: 'Count.' },
    { type: 'model', response: [] },
  ]);
});

test('a continued response is the start of the last model turn', () => {
  expect(toChatHistory(messages, 'One, two').at(-1)).toEqual({ type: 'model', response: ['One, two'] });
  expect(toChatHistory(messages, '').at(-1)).toEqual({ type: 'model', response: [] });
});
