/**
 * The trained chat model's chats evaluate the tokens llama-server would: its GGUF's template
 * rendered, then the whole prompt tokenized as llama.cpp tokenizes it (special tokens parsed,
 * the text between them in one piece). The prompts are llama-server's own /apply-template output
 * for the same messages (bench/chat-agreement.ts compares against a running llama-server). The
 * model is fetched by npm test's install step (infra/fetch-trained-models.py); without it this fails.
 */
import { existsSync } from 'node:fs';
import { LlamaEngine } from '../../engines/llama/engine';
import { trainedModelPath, trainedModels } from '../../infra/trained-models';

jest.setTimeout(60_000);

const file = trainedModelPath(trainedModels().find((m) => m.name === 'smollm2-135m-instruct')!);
const engine = new LlamaEngine({ gpu: 'false', contextSize: 1024, sequences: 1, threads: 1 });
const DEFAULT_SYSTEM = '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n';

beforeAll(async () => {
  if (!existsSync(file)) throw new Error(`${file} is missing: run python3 infra/fetch-trained-models.py (npm test's install does)`);
  await engine.load('smol', file, { contextSize: 1024, sequences: 1 });
});
afterAll(() => engine.dispose());

test.each([
  [
    'a question',
    [{ role: 'user' as const, content: 'What is the capital of France?' }],
    `${DEFAULT_SYSTEM}<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n`,
  ],
  [
    'a system prompt and two turns',
    [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: 'Hi' },
      { role: 'assistant' as const, content: 'Hello!' },
      { role: 'user' as const, content: 'Bye' },
    ],
    '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n',
  ],
  // "\n" of the template and the message's leading spaces are one token ("\n  ") for llama.cpp.
  [
    'a message with whitespace at its seams',
    [{ role: 'user' as const, content: '  spaces  \n' }],
    `${DEFAULT_SYSTEM}<|im_start|>user\n  spaces  \n<|im_end|>\n<|im_start|>assistant\n`,
  ],
])('%s: the tokens llama.cpp gives the rendered prompt', async (_name, messages, prompt) => {
  const llama = await engine.backend();
  const model = await llama.loadModel({ modelPath: file, vocabOnly: true });
  try {
    // llama-server's /tokenize with add_special and parse_special (this model adds no BOS).
    expect(await engine.promptTokens('smol', { messages })).toEqual(model.tokenize(prompt, true));
  } finally {
    await model.dispose();
  }
});
