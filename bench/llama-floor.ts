/**
 * llama.cpp's own `llama-batched-bench` as a floor: built once from the llama.cpp source
 * node-llama-cpp ships (infra/llama-batched-bench.sh, into the per-user cache) and run on a
 * benchmark's model, for what llama.cpp itself does with the same weights and threads.
 */
import { execFile, execFileSync } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

/** The binary, built once into the per-user cache (bench.sh passes it; built here otherwise). */
export function batchedBenchBinary(): string {
  if (process.env.KILN_LLAMA_BATCHED_BENCH) return process.env.KILN_LLAMA_BATCHED_BENCH;
  const script = path.resolve(__dirname, '../infra/llama-batched-bench.sh');
  return execFileSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

/** llama.cpp's aggregate: N sequences of `prompt` tokens each, then `tokens` decoded for all N at once. */
export interface BatchedBenchResult {
  pl: number;
  tg: number;
  t: number;
  /** Prompt processing time of all sequences, seconds. */
  t_pp: number;
  /** Generation time of all sequences' `tokens`, seconds. */
  t_tg: number;
}

export async function batchedBench(
  bin: string,
  file: string,
  n: number,
  prompt: number,
  tokens: number,
  threads: number,
  attempt = 1,
): Promise<BatchedBenchResult> {
  const { stdout, stderr } = await promisify(execFile)(
    bin,
    ['-m', file, '-c', String(n * (prompt + tokens)), '-b', '2048', '-ub', '512', '-ngl', '99']
      .concat(['-npp', String(prompt), '-ntg', String(tokens), '-npl', String(n), '-t', String(threads)])
      .concat(['--output-format', 'jsonl']),
    { maxBuffer: 64 * 2 ** 20 },
  );
  const line = `${stdout}\n${stderr}`.split('\n').find((l) => l.startsWith('{') && l.includes('"speed_tg"'));
  if (!line) {
    // Seen once in five runs on the loaded box: a run that exits 0 without its result line.
    if (attempt < 3) return batchedBench(bin, file, n, prompt, tokens, threads, attempt + 1);
    throw new Error(`llama-batched-bench printed no result:\n${stdout.slice(-1000)}\n${stderr.slice(-2000)}`);
  }
  return JSON.parse(line) as BatchedBenchResult;
}
