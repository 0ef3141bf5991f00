/**
 * The OpenAI Agents SDK (`@openai/agents`) on Kiln's Responses API, unchanged but for its OpenAI
 * client's base URL: an agent with one function tool runs through two tool round trips, run
 * whole and streamed. Each model turn is a response (a prediction) whose input carries the
 * earlier turns' calls and the tool's results, as the SDK resends them.
 *
 * kiln/tiny-llama has random weights: a call is forced by `toolChoice: 'required'` (the same
 * grammar as chat completions' tool calls), and it cannot decide by itself when it has what it
 * needs, so the agent's tool-use behaviour ends the run after the second result, with that
 * result as its final output.
 */
import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { closeDb, type Db } from '../../db/client';
import { API_URL, api, newAccount, testDb } from '../helpers';

jest.setTimeout(120_000);

const MODEL = 'kiln/tiny-llama';
const ROUND_TRIPS = 2;

let db: Db;
let token: string;
let client: OpenAI;
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'openai-agents')).token;
  client = new OpenAI({ apiKey: token, baseURL: `${API_URL}/openai/v1`, maxRetries: 0 });
  // Traces would go to OpenAI's platform: none leave the suite.
  setTracingDisabled(true);
});
afterAll(() => closeDb(db));

const predictionOf = async (responseId: string) => (await api(`/v1/predictions/${responseId.replace(/^resp_/, '')}`, { token })).body;

/** The agent, and the calls its tool got: each answers a temperature of its own, so a result names its call. */
function forecaster() {
  const calls: Array<{ city: string; answer: string }> = [];
  const getWeather = tool({
    name: 'get_weather',
    description: 'The temperature in a city, in degrees Celsius',
    parameters: z.object({ city: z.string().max(12) }),
    execute: async ({ city }) => {
      const answer = JSON.stringify({ city, celsius: 7 * (calls.length + 1) });
      calls.push({ city, answer });
      return answer;
    },
  });
  const agent = new Agent({
    name: 'forecaster',
    instructions: 'Look up the weather with get_weather, then answer.',
    model: new OpenAIResponsesModel(client, MODEL),
    tools: [getWeather],
    modelSettings: { toolChoice: 'required', maxTokens: 60, temperature: 0 },
    resetToolChoice: false,
    toolUseBehavior: (_context, results) => {
      const last = results.at(-1);
      return calls.length < ROUND_TRIPS || last?.type !== 'function_output'
        ? { isFinalOutput: false, isInterrupted: undefined }
        : { isFinalOutput: true, isInterrupted: undefined, finalOutput: String(last.output) };
    },
  });
  return { agent, calls };
}

/**
 * Two model turns, each a response of Kiln's with one function_call item; the second's input holds
 * the first call and its result, so the model read it; the final output is the last result.
 */
async function expectTwoRoundTrips(
  calls: Array<{ city: string; answer: string }>,
  responseIds: Array<string | undefined>,
  finalOutput: unknown,
) {
  expect(calls).toHaveLength(ROUND_TRIPS);
  expect(finalOutput).toBe(calls[1].answer);
  expect(responseIds).toHaveLength(ROUND_TRIPS);
  const responses = await Promise.all(responseIds.map((id) => client.responses.retrieve(id!)));
  for (const r of responses) {
    expect(r.status).toBe('completed');
    expect(r.output).toEqual([expect.objectContaining({ type: 'function_call', name: 'get_weather', status: 'completed' })]);
  }
  const firstCall = responses[0].output[0] as OpenAI.Responses.ResponseFunctionToolCall;
  expect(JSON.parse(firstCall.arguments).city).toBe(calls[0].city);
  const secondTurn = (await predictionOf(responses[1].id)).input.messages as Array<{ role: string; content: string }>;
  expect(secondTurn).toContainEqual({ role: 'user', content: `Result of get_weather (call ${firstCall.call_id}): ${calls[0].answer}` });
  return responses;
}

test('run: two tool round trips through /responses; the model’s second turn reads the first result; the final output is the tool’s', async () => {
  const { agent, calls } = forecaster();
  const result = await run(agent, 'What is the weather in Oslo?');
  await expectTwoRoundTrips(
    calls,
    result.rawResponses.map((r) => r.responseId),
    result.finalOutput,
  );
  expect(result.newItems.map((i) => i.type)).toEqual([
    'tool_call_item',
    'tool_call_output_item',
    'tool_call_item',
    'tool_call_output_item',
  ]);
});

test('run streamed: the same two round trips over response streams', async () => {
  const { agent, calls } = forecaster();
  const streamed = await run(agent, 'What is the weather in Rome?', { stream: true });
  const events: string[] = [];
  for await (const e of streamed) events.push(e.type === 'run_item_stream_event' ? e.name : e.type);
  await streamed.completed;
  expect(streamed.error).toBeNull();
  await expectTwoRoundTrips(
    calls,
    streamed.rawResponses.map((r) => r.responseId),
    streamed.finalOutput,
  );
  expect(events.filter((e) => e === 'tool_called' || e === 'tool_output')).toEqual([
    'tool_called',
    'tool_output',
    'tool_called',
    'tool_output',
  ]);
});
