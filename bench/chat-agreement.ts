/**
 * Chat agreement with llama.cpp's own server: the fixed conversations of
 * bench/chat-agreement/conversations.json through llama-server (built once from the llama.cpp
 * source node-llama-cpp ships, infra/llama-server.sh; `--jinja`, so it renders the GGUF's own
 * template) and through Kiln's engine (LlamaEngine, as the engine worker runs it), on the trained
 * chat model kiln/smollm2-135m-instruct. For each: the prompt tokens each side evaluates (the
 * server's /apply-template then /tokenize, as its chat endpoint does; Kiln's promptTokens, what
 * generate() evaluates and counts), and the greedy replies. Prints the table, the totals, and for
 * each reply that differs where it parts and both sides' two likeliest tokens there. No running
 * stack needed.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { LlamaModel, Token } from 'node-llama-cpp';
import { textGenerationInput } from '../domain/tasks/text-generation';
import { sourceBuildSetting } from '../engines/llama/backend';
import { LlamaEngine } from '../engines/llama/engine';
import { trainedModelPath, trainedModels } from '../infra/trained-models';
import { answerMatches, type Conversation, clip, firstDifference, partingStep, share } from './chat-agreement/compare';
import { saveResult, table } from './lib';

const MODEL = 'smollm2-135m-instruct';
const CONTEXT = 4096;
const SEED = 1234;
const CONVERSATIONS = path.resolve(__dirname, 'chat-agreement/conversations.json');

export interface ChatAgreementOptions {
  maxTokens: number;
  threads: number;
  /** llama-server's binary; built (or found) by infra/llama-server.sh where not given. */
  server?: string;
  /** Only the conversations whose names contain one of these. */
  only?: string[];
}

/** llama-server, built once into the per-user cache (KILN_LLAMA_SERVER names another). */
export function llamaServerBinary(): string {
  if (process.env.KILN_LLAMA_SERVER) return process.env.KILN_LLAMA_SERVER;
  const script = path.resolve(__dirname, '../infra/llama-server.sh');
  return execFileSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

interface Server {
  url: string;
  proc: ChildProcess;
  // biome-ignore lint/suspicious/noExplicitAny: llama-server's JSON, read field by field
  post: (route: string, body: unknown) => Promise<any>;
  stop: () => void;
}

async function startServer(bin: string, model: string, threads: number): Promise<Server> {
  const port = await freePort();
  const args = [
    '-m',
    model,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '-c',
    String(CONTEXT),
    '-np',
    '1',
    '-t',
    String(threads),
    '-ngl',
    '99',
    '--jinja',
    '--no-webui',
  ];
  const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const keep = (b: Buffer) => (log = (log + b.toString()).slice(-4000));
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  let exited = false;
  proc.once('exit', () => (exited = true));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (exited) throw new Error(`llama-server exited at start:\n${log}`);
    const ok = await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      proc.kill();
      throw new Error(`llama-server was not healthy within 120 s:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const post = async (route: string, body: unknown) => {
    const r = await fetch(`${url}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`llama-server ${route}: HTTP ${r.status} ${text.slice(0, 500)}`);
    return JSON.parse(text);
  };
  return { url, proc, post, stop: () => proc.kill('SIGTERM') };
}

/** The CPU backend library this process loaded, where it is one of the prebuilt's per-CPU variants (Linux). */
function cpuLibrary(): string | undefined {
  try {
    return /libggml-cpu-[\w-]+\.so/.exec(readFileSync('/proc/self/maps', 'utf8'))?.[0];
  } catch {
    return undefined;
  }
}

/** A token with its probability, as the two sides report their likeliest next tokens. */
interface Candidate {
  token: string;
  p: number;
}
const shown = (cs: Candidate[]) => cs.map((c) => `${JSON.stringify(c.token)} ${c.p.toFixed(4)}`).join(', ');

interface Row {
  name: string;
  deliberate?: string;
  promptTokens: { kiln: number; server: number; equal: boolean; firstDifference?: number };
  output: { kiln: string; server: string; equal: boolean; kilnTokens: number; serverTokens: number; kilnStop: string; serverStop: string };
  expected?: string[];
  kilnMatches?: boolean;
  serverMatches?: boolean;
  parting?: { char: number; step: number; common: string; kiln: string; server: string; serverTop: Candidate[]; kilnTop: Candidate[] };
  /** The tokens around the first that differs, each as its text. */
  promptParting?: { index: number; kiln: string; server: string };
}

/**
 * Kiln's binary's two likeliest next tokens after `prompt` then `output`: the prompt evaluated
 * in one batch and the output a token at a time, as a generation evaluates them, on a context
 * of its own (the engine's sequences are not reachable from here).
 */
async function kilnTop(model: LlamaModel, threads: number, prompt: Token[], output: Token[]): Promise<Candidate[]> {
  const context = await model.createContext({ sequences: 1, contextSize: CONTEXT, threads });
  try {
    const sequence = context.getSequence();
    const all = [...prompt, ...output];
    const first = output.length === 0 ? prompt.slice(0, -1) : prompt;
    if (first.length > 0) await sequence.controlledEvaluate(first);
    const rest = all.slice(first.length);
    let probabilities: Map<Token, number> | undefined;
    for (let i = 0; i < rest.length; i++) {
      const last = i === rest.length - 1;
      const out = await sequence.controlledEvaluate([last ? [rest[i], { generateNext: { probabilities: true } }] : rest[i]]);
      if (last) probabilities = out.at(-1)?.next?.probabilities;
    }
    return [...(probabilities ?? new Map<Token, number>()).entries()]
      .slice(0, 2)
      .map(([t, p]) => ({ token: model.detokenize([t], true), p }));
  } finally {
    await context.dispose();
  }
}

export async function chatAgreement(o: ChatAgreementOptions) {
  const { conversations: all } = JSON.parse(readFileSync(CONVERSATIONS, 'utf8')) as { conversations: Conversation[] };
  const conversations = o.only?.length ? all.filter((c) => o.only!.some((n) => c.name.includes(n))) : all;
  const trained = trainedModels().find((m) => m.name === MODEL);
  if (!trained) throw new Error(`infra/trained-models.json has no ${MODEL}`);
  const file = trainedModelPath(trained);
  if (!existsSync(file))
    throw new Error(
      `${file} is missing: fetch it with KILN_CACHE=${path.dirname(path.dirname(path.dirname(file)))} python3 infra/fetch-trained-models.py`,
    );

  const bin = o.server ?? llamaServerBinary();
  const server = await startServer(bin, file, o.threads);
  const engine = new LlamaEngine({
    gpu: 'auto',
    contextSize: CONTEXT,
    sequences: 1,
    threads: o.threads,
    sourceBuild: sourceBuildSetting(),
  });
  try {
    const props = (await (await fetch(`${server.url}/props`)).json()) as {
      build_info?: string;
      default_generation_settings?: { params?: { repeat_penalty?: number; samplers?: string[] } };
    };
    const defaults = props.default_generation_settings?.params ?? {};
    await engine.load(MODEL, file, { contextSize: CONTEXT, sequences: 1 });
    const model = await (await engine.backend()).loadModel({ modelPath: file });
    console.log(
      `model: kiln/${MODEL} (${path.basename(file)}), ${conversations.length} conversations, greedy (temperature 0), at most ${o.maxTokens} tokens, seed ${SEED}, ${o.threads} thread(s)`,
    );
    console.log(
      `llama-server: ${bin} (build ${props.build_info}), --jinja -c ${CONTEXT} -np 1 -t ${o.threads}, flash attention auto; /v1/chat/completions with cache_prompt false; its defaults: repeat_penalty ${defaults.repeat_penalty}, samplers ${(defaults.samplers ?? []).join(',')}`,
    );
    const cpu = cpuLibrary();
    console.log(
      `Kiln: the engine (LlamaEngine.generate, not through the API), llama.cpp binary: ${engine.binary}${cpu ? ` (${cpu})` : ''}; ` +
        'a fresh owner per conversation, so no prompt is reused from another',
    );
    if (engine.binary === 'prebuilt') {
      console.log(
        "  the prebuilt's CPU kernels are not llama-server's (it picks a library per CPU generation, AMX included where the CPU has it): " +
          'near ties may go the other way; bash infra/llama-addon-build.sh builds the engine from the same source with the same options',
      );
    }

    const rows: Row[] = [];
    for (const [i, c] of conversations.entries()) {
      const { prompt } = await server.post('/apply-template', { messages: c.messages });
      const serverPrompt = (await server.post('/tokenize', { content: prompt, add_special: true, parse_special: true, with_pieces: false }))
        .tokens as Token[];
      const chat = await server.post('/v1/chat/completions', {
        messages: c.messages,
        temperature: 0,
        max_tokens: o.maxTokens,
        cache_prompt: false,
        seed: SEED,
      });
      if (chat.usage?.prompt_tokens !== serverPrompt.length) {
        throw new Error(
          `${c.name}: llama-server's chat evaluated ${chat.usage?.prompt_tokens} prompt tokens, its /tokenize gave ${serverPrompt.length}`,
        );
      }
      const serverText: string = chat.choices[0].message.content ?? '';

      const kilnPrompt = await engine.promptTokens(MODEL, { messages: c.messages });
      const result = await engine.generate(
        MODEL,
        textGenerationInput.parse({ messages: c.messages, max_tokens: o.maxTokens, temperature: 0, seed: SEED }),
        { owner: `chat-agreement-${i}` },
      );
      if (result.inputTokens !== kilnPrompt.length || result.cachedTokens !== 0) {
        throw new Error(
          `${c.name}: Kiln evaluated ${result.inputTokens} prompt tokens (${result.cachedTokens} cached), promptTokens gave ${kilnPrompt.length}`,
        );
      }
      const kilnText = result.chunks.join('');

      const promptDiff = firstDifference(kilnPrompt, serverPrompt);
      const row: Row = {
        name: c.name,
        deliberate: c.deliberate,
        promptTokens: {
          kiln: kilnPrompt.length,
          server: serverPrompt.length,
          equal: promptDiff === undefined,
          firstDifference: promptDiff,
        },
        output: {
          kiln: kilnText,
          server: serverText,
          equal: kilnText === serverText,
          kilnTokens: result.outputTokens,
          serverTokens: chat.usage?.completion_tokens,
          kilnStop: result.stopReason,
          serverStop: chat.choices[0].finish_reason,
        },
        expected: c.expected,
        kilnMatches: answerMatches(kilnText, c),
        serverMatches: answerMatches(serverText, c),
      };
      if (promptDiff !== undefined) {
        // Token by token, so a different cut of the same text shows.
        const around = (ts: Token[]) =>
          JSON.stringify(ts.slice(Math.max(0, promptDiff - 2), promptDiff + 3).map((t) => model.detokenize([t], true)));
        row.promptParting = { index: promptDiff, kiln: around(kilnPrompt), server: around(serverPrompt) };
      }
      if (!row.output.equal) {
        // The server's greedy tokens with its two likeliest at each step (the same prompt tokens, /completion).
        const completion = await server.post('/completion', {
          prompt: serverPrompt,
          n_predict: o.maxTokens,
          temperature: 0,
          cache_prompt: false,
          seed: SEED,
          n_probs: 2,
          return_tokens: true,
        });
        const steps = completion.completion_probabilities as Array<{
          token: string;
          top_logprobs: Array<{ token: string; logprob: number }>;
        }>;
        const step = partingStep(
          steps.map((s) => s.token),
          kilnText,
        );
        const char = firstDifference(kilnText, serverText) ?? 0;
        const serverTop = (steps[step]?.top_logprobs ?? []).map((t) => ({ token: t.token, p: Math.exp(t.logprob) }));
        const kilnTopHere =
          promptDiff === undefined ? await kilnTop(model, o.threads, kilnPrompt, (completion.tokens as Token[]).slice(0, step)) : [];
        row.parting = {
          char,
          step,
          common: kilnText.slice(Math.max(0, char - 30), char),
          kiln: kilnText.slice(char, char + 40),
          server: serverText.slice(char, char + 40),
          serverTop,
          kilnTop: kilnTopHere,
        };
      }
      rows.push(row);
      console.log(`${c.name}: prompt ${row.promptTokens.equal ? 'equal' : 'differs'}, output ${row.output.equal ? 'equal' : 'differs'}`);
    }

    const yn = (b: boolean | undefined) => (b === undefined ? '-' : b ? 'yes' : 'no');
    table(
      'Chat agreement with llama-server',
      rows.map((r) => ({
        conversation: r.deliberate ? `${r.name} (by design)` : r.name,
        'prompt equal': `${yn(r.promptTokens.equal)} (${r.promptTokens.kiln}/${r.promptTokens.server})`,
        'output equal': yn(r.output.equal),
        Kiln: clip(r.output.kiln, 36),
        'llama-server': clip(r.output.server, 36),
        expected: r.expected?.join('|') ?? '-',
        'Kiln ✓': yn(r.kilnMatches),
        'server ✓': yn(r.serverMatches),
      })),
    );
    const counted = rows.filter((r) => !r.deliberate);
    const scored = counted.filter((r) => r.expected?.length);
    const totals = {
      promptAgreement: share(counted.filter((r) => r.promptTokens.equal).length, counted.length),
      outputAgreement: share(counted.filter((r) => r.output.equal).length, counted.length),
      kilnExactMatch: share(scored.filter((r) => r.kilnMatches).length, scored.length),
      serverExactMatch: share(scored.filter((r) => r.serverMatches).length, scored.length),
    };
    console.log(
      `\nprompt tokens equal: ${totals.promptAgreement}; outputs equal: ${totals.outputAgreement}; ` +
        `known answers matched: Kiln ${totals.kilnExactMatch}, llama-server ${totals.serverExactMatch}`,
    );
    for (const r of rows.filter((r) => r.deliberate)) {
      console.log(
        `not counted, different by design: ${r.name}: ${r.deliberate} (prompt tokens ${r.promptTokens.equal ? 'equal' : 'differ'})`,
      );
    }
    for (const r of rows.filter((r) => r.promptParting)) {
      const p = r.promptParting!;
      console.log(
        `\n${r.name}: prompt tokens part at token ${p.index} (${r.promptTokens.kiln} against ${r.promptTokens.server}): Kiln ${p.kiln}, llama-server ${p.server}`,
      );
    }
    for (const r of rows.filter((r) => r.parting)) {
      const p = r.parting!;
      console.log(
        `\n${r.name}: outputs part at character ${p.char} (generated token ${p.step}), after …${JSON.stringify(p.common)}\n` +
          `  Kiln:         ${JSON.stringify(p.kiln)}\n  llama-server: ${JSON.stringify(p.server)}\n` +
          `  two likeliest there: llama-server ${shown(p.serverTop)}; Kiln's binary ${p.kilnTop.length ? shown(p.kilnTop) : '(prompts differ)'}`,
      );
    }
    const file_ = await saveResult('chat-agreement', {
      options: o,
      server: { bin, build: props.build_info },
      kiln: { binary: engine.binary, path: 'engine' },
      totals,
      rows,
    });
    console.log(`\nwritten: ${file_}`);
    await model.dispose();
  } finally {
    server.stop();
    await engine.dispose();
  }
}
