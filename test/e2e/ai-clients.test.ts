/**
 * Two popular LLM clients pointed at /openai/v1 unchanged: Vercel's AI SDK
 * (`@ai-sdk/openai-compatible`) and LangChain's `ChatOpenAI`. Structured output and tool calls
 * work with kiln/tiny-llama's random weights, because a grammar constrains what it writes.
 */
import { z } from 'zod';
import { closeDb, type Db } from '../../db/client';
import { API_URL, newAccount, testDb } from '../helpers';

jest.setTimeout(180_000);

let db: Db;
let token: string;
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'aiclients')).token;
});
afterAll(() => closeDb(db));

const person = z.object({
  name: z.string(),
  age: z.number().int(),
  pet: z.enum(['cat', 'dog', 'none']),
  nick: z.string().max(12).nullable(),
});
const weatherArgs = z.object({ city: z.string(), unit: z.enum(['C', 'F']) });

describe('Vercel AI SDK', () => {
  // The AI SDK is ESM only: jest reaches it through a real import() (one at a time: jest's ESM
  // loader fails on two imports that link the same module at once).
  const sdk = async () => {
    const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible');
    const ai = await import('ai');
    // supportsStructuredOutputs: the provider sends the schema as response_format json_schema.
    const kiln = createOpenAICompatible({ name: 'kiln', baseURL: `${API_URL}/openai/v1`, apiKey: token, supportsStructuredOutputs: true });
    return { model: kiln('kiln/tiny-llama'), ai };
  };

  test('generateObject with a zod schema returns an object that parses', async () => {
    const { model, ai } = await sdk();
    const { object, finishReason } = await ai.generateObject({
      model,
      schema: person,
      prompt: 'Invent a person.',
      maxOutputTokens: 150,
      seed: 1,
      maxRetries: 0,
    });
    expect(person.parse(object)).toEqual(object);
    expect(finishReason).toBe('stop');
  });

  test('generateText with a required tool: the call and its typed input', async () => {
    const { model, ai } = await sdk();
    const result = await ai.generateText({
      model,
      prompt: 'What is the weather in Paris?',
      tools: { get_weather: ai.tool({ description: 'The weather in a city', inputSchema: weatherArgs }) },
      toolChoice: 'required',
      maxOutputTokens: 100,
      seed: 2,
      maxRetries: 0,
    });
    expect(result.finishReason).toBe('tool-calls');
    expect(result.toolCalls).toHaveLength(1);
    expect(result.toolCalls[0].toolName).toBe('get_weather');
    expect(weatherArgs.parse(result.toolCalls[0].input)).toEqual(result.toolCalls[0].input);
  });

  test('generateText runs the tool and answers with its result (two steps)', async () => {
    const { model, ai } = await sdk();
    const calls: unknown[] = [];
    const result = await ai.generateText({
      model,
      prompt: 'What is the weather in Paris?',
      tools: {
        get_weather: ai.tool({
          description: 'The weather in a city',
          inputSchema: weatherArgs,
          execute: async (input) => {
            calls.push(input);
            return { temperature: 21 };
          },
        }),
      },
      toolChoice: { type: 'tool', toolName: 'get_weather' },
      prepareStep: ({ stepNumber }) => (stepNumber > 0 ? { toolChoice: 'none' } : undefined),
      stopWhen: ai.stepCountIs(2),
      maxOutputTokens: 150,
      seed: 3,
      maxRetries: 0,
    });
    expect(calls).toHaveLength(1);
    expect(result.steps).toHaveLength(2);
    expect(typeof result.text).toBe('string');
  });
});

describe('LangChain ChatOpenAI', () => {
  const chat = async () => {
    const { ChatOpenAI } = await import('@langchain/openai');
    return new ChatOpenAI({
      model: 'kiln/tiny-llama',
      apiKey: token,
      configuration: { baseURL: `${API_URL}/openai/v1` },
      maxTokens: 150,
      maxRetries: 0,
    });
  };

  test('withStructuredOutput (json_schema) returns an object that parses', async () => {
    const llm = (await chat()).withStructuredOutput(person, { method: 'jsonSchema', name: 'person' });
    const object = await llm.invoke('Invent a person.', { seed: 4 } as never);
    expect(person.parse(object)).toEqual(object);
  });

  test('bindTools with tool_choice required gets a tool call with arguments that follow the schema', async () => {
    const { tool } = await import('@langchain/core/tools');
    const getWeather = tool(async () => 'sunny', { name: 'get_weather', description: 'The weather in a city', schema: weatherArgs });
    const llm = (await chat()).bindTools([getWeather], { tool_choice: 'required' });
    const message = await llm.invoke('What is the weather in Paris?');
    expect(message.tool_calls).toHaveLength(1);
    expect(message.tool_calls![0].name).toBe('get_weather');
    expect(weatherArgs.parse(message.tool_calls![0].args)).toEqual(message.tool_calls![0].args);
  });
});
