/** The kiln command line: `npm run kiln -- <command>` (or `npx kiln`). */
import { Command } from 'commander';
import { apiContext, CliError, request } from './client';
import { registerCommands } from './commands';
import { inspectPrediction, printInspection } from './inspect';
import { push } from './push';

const program = new Command('kiln').description('Kiln: run models over a Temporal-backed API').option('--json', 'print JSON for scripts');

program
  .command('push <model> <files...>')
  .description('upload weight files and create a version of owner/name (creating the model with --task)')
  .option('--task <task>', 'create the model first, with this task type (e.g. text-generation)')
  .option(
    '--lora-for <base>',
    'the files are a GGUF LoRA adapter of this base (owner/name or owner/name:version); creates the model as text-generation unless --task says otherwise',
  )
  .option('--visibility <v>', 'public or private, when creating', 'private')
  .option('--sequences <n>', 'predictions one loaded copy runs at once', (v) => Number.parseInt(v, 10))
  .option('--idle-ttl <seconds>', 'unload after this long without predictions (scale to zero)', (v) => Number.parseInt(v, 10))
  .option('--draft <model>', 'speculative decoding with this draft model (owner/name, same tokenizer): same output, faster')
  .option('--input-lookup', "speculative decoding from the prompt's own tokens (for outputs that repeat their input)")
  .option('--max-attempts <n>', 'attempts a failing prediction gets, the first included (1: no retry)', (v) => Number.parseInt(v, 10))
  .option('--retry-interval <seconds>', 'wait before the second attempt', Number)
  .option('--retry-backoff <factor>', 'each later wait is the previous one times this', Number)
  .action(
    async (
      model: string,
      files: string[],
      o: {
        task?: string;
        loraFor?: string;
        visibility: string;
        sequences?: number;
        idleTtl?: number;
        draft?: string;
        inputLookup?: boolean;
        maxAttempts?: number;
        retryInterval?: number;
        retryBackoff?: number;
      },
    ) => {
      const ctx = apiContext();
      const json = program.opts().json as boolean | undefined;
      if (!/^[^/]+\/[^/]+$/.test(model)) throw new CliError(`model must be owner/name, not ${model}`);
      const [owner, name] = model.split('/');
      const task = o.task ?? (o.loraFor ? 'text-generation' : undefined);
      if (task) {
        await request(ctx, '/v1/models', { method: 'POST', json: { owner, name, task, visibility: o.visibility } }).catch((err) => {
          if (!/409/.test(String(err.message))) throw err;
        });
      }
      if (o.draft && o.inputLookup) throw new CliError('--draft and --input-lookup are two ways of speculating: give one');
      const speculative = o.draft
        ? { type: 'draft' as const, model: o.draft }
        : o.inputLookup
          ? { type: 'input_lookup' as const }
          : undefined;
      const settings =
        o.sequences || o.idleTtl || speculative ? { sequences: o.sequences, idleTtlSeconds: o.idleTtl, speculative } : undefined;
      const retry =
        o.maxAttempts !== undefined
          ? {
              max_attempts: o.maxAttempts,
              ...(o.retryInterval !== undefined ? { initial_interval_s: o.retryInterval } : {}),
              ...(o.retryBackoff !== undefined ? { backoff: o.retryBackoff } : {}),
            }
          : undefined;
      if (!retry && (o.retryInterval !== undefined || o.retryBackoff !== undefined))
        throw new CliError('--retry-interval and --retry-backoff need --max-attempts');
      const version = await push(ctx, model, files, { quiet: Boolean(json), settings, retry, loraFor: o.loraFor });
      if (json) console.log(JSON.stringify(version));
      else
        console.log(
          `pushed ${model}:${version.id}\nrun it: curl -X POST ${ctx.url}/v1/models/${model}/predictions -H "Authorization: Bearer $KILN_API_TOKEN" -d '{"input": {...}}'`,
        );
    },
  );

program
  .command('inspect <id>')
  .description('a prediction next to its Temporal workflow: run, status, history, pending activities, and the Temporal UI link')
  .action(async (id: string) => {
    const inspection = await inspectPrediction(apiContext(), id);
    if (program.opts().json) console.log(JSON.stringify(inspection));
    else printInspection(inspection);
  });

registerCommands(program);

program.parseAsync().catch((err) => {
  console.error(`kiln: ${err instanceof Error ? err.message : err}`);
  process.exit(1);
});
