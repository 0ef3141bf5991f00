import type { Tool } from '../../api/openai/protocol';
import { engineChat, mayBeToolCall, parseToolCalls } from '../../api/openai/tools';

const weather: Tool = {
  type: 'function',
  function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};
const time: Tool = { type: 'function', function: { name: 'get_time' } };
const ask = [{ role: 'user' as const, content: 'hi' }];

test('no tools, or tool_choice none: messages as they are, no grammar', () => {
  expect(engineChat({ messages: ask })).toEqual({ messages: ask, json_schema: undefined, toolMode: 'none' });
  expect(engineChat({ messages: ask, tools: [weather], tool_choice: 'none' }).toolMode).toBe('none');
});

test('response_format becomes json_schema', () => {
  expect(engineChat({ messages: ask, response_format: { type: 'json_object' } }).json_schema).toEqual({ type: 'object' });
  expect(
    engineChat({ messages: ask, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string' } } } })
      .json_schema,
  ).toEqual({ type: 'string' });
});

test('required: the tools in a system message and a grammar of a call of one of them', () => {
  const r = engineChat({ messages: [{ role: 'system', content: 'Be brief.' }, ...ask], tools: [weather, time], tool_choice: 'required' });
  expect(r.toolMode).toBe('forced');
  expect(r.messages[0].content).toMatch(/^Be brief\.\n\nYou can call these functions:\n- get_weather/);
  expect(r.json_schema!.anyOf).toHaveLength(2);
  expect(r.json_schema!.anyOf![0].properties!.name).toEqual({ const: 'get_weather' });
});

test('a named function: only it, and parallel calls stay off', () => {
  const r = engineChat({
    messages: ask,
    tools: [weather, time],
    tool_choice: { type: 'function', function: { name: 'get_time' } },
    parallel_tool_calls: true,
  });
  expect(r.json_schema!.properties!.name).toEqual({ const: 'get_time' });
  expect(r.messages[0].content).not.toContain('get_weather');
});

test('calls and results in the history are rendered as the model writes them', () => {
  const r = engineChat({
    messages: [
      ...ask,
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
    ],
  });
  expect(r.messages.slice(1)).toEqual([
    { role: 'assistant', content: '{"name":"get_weather","arguments":{"city":"Oslo"}}' },
    { role: 'user', content: 'Result of get_weather (call c1): sunny' },
  ]);
});

test('parsing calls: known tools with object arguments only', () => {
  expect(parseToolCalls('{"name":"get_weather","arguments":{"city":"Oslo"}}', [weather], 'p')).toEqual([
    { id: 'call_p_0', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
  ]);
  expect(parseToolCalls('[{"name":"get_time","arguments":{}},{"name":"get_weather","arguments":{}}]', [weather, time], 'p')).toHaveLength(
    2,
  );
  expect(parseToolCalls('{"name":"other","arguments":{}}', [weather], 'p')).toBeUndefined();
  expect(parseToolCalls('{"name":"get_weather","arguments":null}', [weather], 'p')).toBeUndefined();
  expect(parseToolCalls('Hello', [weather], 'p')).toBeUndefined();
  expect(parseToolCalls('{"name":"get_weather","argu', [weather], 'p')).toBeUndefined();
});

test('an auto answer is held back only while it may be a call', () => {
  expect(mayBeToolCall('  ')).toBe(true);
  expect(mayBeToolCall(' {"na')).toBe(true);
  expect(mayBeToolCall('Hello')).toBe(false);
});
