/**
 * Two popular LLM clients on Kiln's Responses API, unchanged but for the base URL: the AI SDK's
 * `@ai-sdk/openai` responses model (generateText, streamText) and LangChain's `ChatOpenAI` with
 * `useResponsesApi: true`. Each answer is a prediction, read back to compare.
 */
import { z } from 'zod';
import { closeDb, type Db } from '../../db/client';
import { API_URL, api, newAccount, testDb } from '../helpers';

jest.setTimeout(180_000);

let db: Db;
let token: string;
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'responses-clients')).token;
});
afterAll(() => closeDb(db));

const outputOf = async (responseId: string) =>
  (await api(`/v1/predictions/${responseId.replace(/^resp_/, '')}`, { token })).body.output.join('');
const weatherArgs = z.object({ city: z.string().max(12) });

describe('AI SDK openai.responses', () => {
  // ESM only: one real import() at a time (jest's ESM loader fails on two that link one module at once).
  const sdk = async () => {
    const { createOpenAI } = await import('@ai-sdk/openai');
    const ai = await import('ai');
    const openai = createOpenAI({ baseURL: `${API_URL}/openai/v1`, apiKey: token });
    return { model: openai.responses('kiln/tiny-llama'), ai };
  };

  test('generateText: the text is the prediction’s output, with usage', async () => {
    const { model, ai } = await sdk();
    const result = await ai.generateText({ model, prompt: 'Say something about kilns.', maxOutputTokens: 12, maxRetries: 0 });
    const id = result.response.id;
    expect(id).toMatch(/^resp_/);
    expect(result.text).toBe(await outputOf(id));
    expect(result.usage.outputTokens).toBeGreaterThan(0);
  });

  test('streamText: the streamed text is the prediction’s output', async () => {
    const { model, ai } = await sdk();
    const result = ai.streamText({ model, prompt: 'Stream about kilns.', maxOutputTokens: 20, maxRetries: 0 });
    let text = '';
    for await (const part of result.textStream) text += part;
    const id = (await result.response).id;
    expect(text).toBe(await outputOf(id));
    expect(['stop', 'length']).toContain(await result.finishReason);
  });

  test('generateText with a required tool: a call with typed input', async () => {
    const { model, ai } = await sdk();
    const result = await ai.generateText({
      model,
      prompt: 'What is the weather in Paris?',
      tools: { get_weather: ai.tool({ description: 'The weather in a city', inputSchema: weatherArgs }) },
      toolChoice: 'required',
      maxOutputTokens: 60,
      maxRetries: 0,
    });
    expect(result.toolCalls).toHaveLength(1);
    expect(result.toolCalls[0].toolName).toBe('get_weather');
    expect(weatherArgs.parse(result.toolCalls[0].input)).toEqual(result.toolCalls[0].input);
  });
});

describe('LangChain ChatOpenAI with useResponsesApi', () => {
  const chat = async (maxTokens = 16) => {
    const { ChatOpenAI } = await import('@langchain/openai');
    return new ChatOpenAI({
      model: 'kiln/tiny-llama',
      apiKey: token,
      configuration: { baseURL: `${API_URL}/openai/v1` },
      useResponsesApi: true,
      maxTokens,
      maxRetries: 0,
    });
  };

  test('invoke: the message text is the prediction’s output', async () => {
    const message = await (await chat()).invoke('Say something about kilns.');
    const id = message.response_metadata.id as string;
    expect(id).toMatch(/^resp_/);
    expect(message.text).toBe(await outputOf(id));
  });

  test('stream: the chunks add up to the output', async () => {
    let text = '';
    let id: string | undefined;
    for await (const chunk of await (await chat()).stream('Stream about kilns.')) {
      text += chunk.text;
      id ??= (chunk.response_metadata?.id as string | undefined) ?? (chunk.id as string | undefined);
    }
    expect(id).toMatch(/^resp_/);
    expect(text).toBe(await outputOf(id!));
  });

  test('bindTools with a named tool_choice: a tool call whose arguments follow the schema', async () => {
    const { tool } = await import('@langchain/core/tools');
    const getWeather = tool(async () => 'sunny', { name: 'get_weather', description: 'The weather in a city', schema: weatherArgs });
    // By name: @langchain/openai 1.6's Responses path drops a plain tool_choice 'required' from the request.
    const llm = (await chat(60)).bindTools([getWeather], { tool_choice: 'get_weather' });
    const message = await llm.invoke('What is the weather in Paris?');
    expect(message.tool_calls).toHaveLength(1);
    expect(weatherArgs.parse(message.tool_calls![0].args)).toEqual(message.tool_calls![0].args);
  });
});
