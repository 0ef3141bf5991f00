/**
 * The kiln CLI's commands beyond push: login, run, predictions, models (list, pull), tokens, webhooks.
 * Every command prints for people by default and JSON with --json.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { isTerminalStatus } from '../domain/statuses';
import { retryBatch } from './batch-retry';
import { type ApiContext, apiContext, CliError, CONFIG_FILE, request } from './client';
import { pull } from './pull';
import { showWarmUp } from './warm-up';

// biome-ignore lint/suspicious/noExplicitAny: API JSON, shown as it comes
type Json = Record<string, any>;

/** `-i key=value`: numbers, booleans and JSON stay typed; `@path` uploads the file first. */
export async function parseInputs(ctx: ApiContext, pairs: string[]): Promise<Record<string, unknown>> {
  const input: Record<string, unknown> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new CliError(`-i ${pair}: expected key=value (e.g. -i prompt="hello" or -i image=@photo.png)`);
    const key = pair.slice(0, eq);
    const raw = pair.slice(eq + 1);
    if (raw.startsWith('@')) {
      const file = raw.slice(1);
      const bytes = await readFile(file).catch(() => {
        throw new CliError(`-i ${key}: cannot read ${file}`);
      });
      const form = new FormData();
      form.append('content', new Blob([bytes]), path.basename(file));
      const uploaded = await request<Json>(ctx, '/v1/files', { method: 'POST', body: form });
      input[key] = uploaded.urls.get;
    } else {
      try {
        input[key] = /^(-?\d+(\.\d+)?|true|false|null|\[.*\]|\{.*\})$/s.test(raw) ? JSON.parse(raw) : raw;
      } catch {
        input[key] = raw;
      }
    }
  }
  return input;
}

function printPrediction(p: Json): void {
  console.log(`${p.id}  ${p.model}  ${p.status}`);
  if (p.error) console.log(`error: ${p.error}`);
  if (p.output != null)
    console.log(
      Array.isArray(p.output) && p.output.every((x: unknown) => typeof x === 'string')
        ? p.output.join('')
        : JSON.stringify(p.output, null, 2),
    );
  const m = p.metrics ?? {};
  const figures = Object.entries(m).map(([k, v]) => `${k}=${v}`);
  if (figures.length > 0) console.log(figures.join(' '));
}

/** Follows the prediction's stream: output as it comes, logs to stderr, until done. */
async function follow(ctx: ApiContext, p: Json, quiet: boolean, onFirstEvent?: () => Promise<void>): Promise<void> {
  const res = await fetch(p.urls.stream, { headers: { accept: 'text/event-stream' } });
  if (!res.ok || !res.body) return;
  const { EventSourceParserStream } = await import('eventsource-parser/stream');
  const reader = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (onFirstEvent) await onFirstEvent();
    onFirstEvent = undefined;
    if (done || value.event === 'done') break;
    if (quiet) continue;
    if (value.event === 'output') process.stdout.write(value.data);
    if (value.event === 'logs') process.stderr.write(`${value.data}\n`);
  }
  if (!quiet) process.stdout.write('\n');
  void ctx;
}

async function finalState(ctx: ApiContext, id: string): Promise<Json> {
  for (;;) {
    const p = await request<Json>(ctx, `/v1/predictions/${id}`);
    if (isTerminalStatus(p.status)) return p;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

export function registerCommands(program: Command): void {
  const json = () => Boolean(program.opts().json);
  const out = (value: unknown, human: () => void) => (json() ? console.log(JSON.stringify(value, null, 2)) : human());

  program
    .command('login')
    .description('save the API URL and token for later commands')
    .option('--url <url>', 'the Kiln API', process.env.KILN_API_URL ?? 'http://127.0.0.1:8080')
    .requiredOption('--token <token>', 'an API token (kiln_…)')
    .action(async (o: { url: string; token: string }) => {
      const ctx = { url: o.url.replace(/\/$/, ''), token: o.token };
      const account = await request<Json>(ctx, '/v1/account');
      await mkdir(path.dirname(CONFIG_FILE), { recursive: true });
      await writeFile(CONFIG_FILE, JSON.stringify(ctx), { mode: 0o600 });
      out({ username: account.username, url: ctx.url }, () => console.log(`logged in to ${ctx.url} as ${account.username}`));
    });

  program
    .command('run <model>')
    .description('run a model (owner/name or owner/name:version) and print its output as it streams')
    .option('-i, --input <key=value...>', 'an input; @path uploads a file', (v: string, acc: string[] = []) => [...acc, v])
    .option('--no-stream', 'wait for the result instead of streaming it')
    .action(async (model: string, o: { input?: string[]; stream: boolean }) => {
      const ctx = apiContext();
      const input = await parseInputs(ctx, o.input ?? []);
      const [ref, version] = model.split(':');
      const p = await request<Json>(ctx, version ? '/v1/predictions' : `/v1/models/${ref}/predictions`, {
        method: 'POST',
        json: version ? { version: model, input } : { input },
      });
      if (!json()) console.error(`${p.id} ${p.status}: ${ctx.url}/v1/predictions/${p.id}`);
      const warmUp = showWarmUp(ctx, p.id, json());
      if (o.stream) await follow(ctx, p, json(), () => warmUp.stop());
      const done = await finalState(ctx, p.id);
      await warmUp.stop();
      out(done, () => (o.stream ? done.status !== 'succeeded' && printPrediction(done) : printPrediction(done)));
      if (done.status !== 'succeeded') process.exitCode = 1;
    });

  program
    .command('retry <id>')
    .description(
      'run a failed, canceled or aborted prediction again, as a new run of its workflow (same id and input); for a batch, its failed and unfinished items',
    )
    .option('--version <version>', 'run this version instead (id, owner/name or owner/name:version)')
    .option('--wait', 'wait for the new run to end and print the prediction')
    .action(async (id: string, o: { version?: string; wait?: boolean }) => {
      const ctx = apiContext();
      const p = await request<Json>(ctx, `/v1/predictions/${id}/retry`, {
        method: 'POST',
        json: o.version ? { version: o.version } : {},
      }).catch(async (err: unknown) => {
        // Prediction and batch ids look alike: an id no prediction has may be a batch's.
        if (!(err instanceof CliError) || err.status !== 404 || o.version) throw err;
        await retryBatch(ctx, id, { wait: o.wait, out });
        return undefined;
      });
      if (!p) return;
      if (!o.wait) {
        out(p, () => console.log(`${p.id} ${p.status} (run ${p.run_id})`));
        return;
      }
      const done = await finalState(ctx, p.id);
      out(done, () => printPrediction(done));
      if (done.status !== 'succeeded') process.exitCode = 1;
    });

  const predictions = program.command('predictions').description('list, show, cancel and watch predictions');
  predictions.command('list').action(async () => {
    const page = await request<Json>(apiContext(), '/v1/predictions');
    out(page.results, () => {
      for (const p of page.results) console.log(`${p.id}  ${p.created_at}  ${p.model.padEnd(28)} ${p.status}`);
    });
  });
  predictions.command('get <id>').action(async (id: string) => {
    const p = await request<Json>(apiContext(), `/v1/predictions/${id}`);
    out(p, () => printPrediction(p));
  });
  predictions.command('cancel <id>').action(async (id: string) => {
    const p = await request<Json>(apiContext(), `/v1/predictions/${id}/cancel`, { method: 'POST' });
    out(p, () => console.log(`${p.id} ${p.status}`));
  });
  predictions
    .command('watch <id>')
    .description('stream a prediction’s output and logs until it ends')
    .action(async (id: string) => {
      const ctx = apiContext();
      const p = await request<Json>(ctx, `/v1/predictions/${id}`);
      await follow(ctx, p, json());
      const done = await finalState(ctx, id);
      out(done, () => console.log(`${done.id} ${done.status}`));
    });

  const models = program.command('models').description('models you can run, and GGUF files pulled from a hub');
  models.command('list').action(async () => {
    const page = await request<Json>(apiContext(), '/v1/models');
    out(page.results, () => {
      for (const m of page.results) console.log(`${`${m.owner}/${m.name}`.padEnd(32)} ${m.task.padEnd(18)} ${m.visibility}`);
    });
  });
  models
    .command('pull <source>')
    .description(
      'download hf://OWNER/REPO[@REVISION]/FILE.gguf from a Hugging Face-style hub (resumed, sha256-checked) and make it a version: task, context and chat template from its metadata',
    )
    .option('--name <owner/name>', 'the Kiln model (default: your account and the repository name)')
    .option('--hub <url>', 'the hub (default: KILN_HUB_URL, else https://huggingface.co); HF_TOKEN is sent as its bearer token')
    .option('--max-size <MB>', 'refuse a larger file before downloading it (default: KILN_HUB_MAX_MB, else 65536)', (v) =>
      Number.parseInt(v, 10),
    )
    .option('--max-context <tokens>', 'cap on the trained context the version gets (default: KILN_HUB_MAX_CONTEXT_SIZE, else 8192)', (v) =>
      Number.parseInt(v, 10),
    )
    .option('--visibility <v>', 'public or private, when creating the model', 'private')
    .action(async (source: string, o: { name?: string; hub?: string; maxSize?: number; maxContext?: number; visibility: string }) => {
      if (o.visibility !== 'public' && o.visibility !== 'private')
        throw new CliError(`--visibility is public or private, not ${o.visibility}`);
      const ctx = apiContext();
      const pulled = await pull(ctx, source, {
        name: o.name,
        hub: o.hub,
        maxMb: o.maxSize,
        maxContext: o.maxContext,
        visibility: o.visibility,
        quiet: json(),
      });
      out(pulled, () => {
        const { plan } = pulled;
        const context = plan.contextSize ? `context ${plan.contextSize} (trained ${plan.trainedContext})` : "the server's default context";
        console.log(`pulled ${pulled.source} as ${pulled.model}:${pulled.version}`);
        console.log(`${plan.task} (${plan.because}), ${plan.architecture}, ${context}`);
        console.log(`run it: npm run -s kiln -- run ${pulled.model} -i ${plan.task === 'embeddings' ? 'text=hello' : 'prompt="Hello"'}`);
      });
    });

  const tokens = program.command('tokens').description('API tokens of your account');
  tokens.command('list').action(async () => {
    const page = await request<Json>(apiContext(), '/v1/account/tokens');
    out(page.results, () => {
      for (const t of page.results) console.log(`${t.id}  ${t.prefix}…  ${t.name}  ${t.revoked_at ? 'revoked' : 'active'}`);
    });
  });
  tokens
    .command('create')
    .option('--name <name>', 'what it is for', 'cli')
    .action(async (o: { name: string }) => {
      const t = await request<Json>(apiContext(), '/v1/account/tokens', { method: 'POST', json: { name: o.name } });
      out(t, () => console.log(`${t.token}\n(shown once: store it now)`));
    });
  tokens.command('revoke <id>').action(async (id: string) => {
    const t = await request<Json>(apiContext(), `/v1/account/tokens/${id}`, { method: 'DELETE' });
    out(t, () => console.log(`${t.id} revoked`));
  });

  program
    .command('webhooks')
    .description('webhook signing')
    .command('secret')
    .option('--rotate', 'make a new secret (the old one keeps signing for 24 h)')
    .action(async (o: { rotate?: boolean }) => {
      const ctx = apiContext();
      const s = await request<Json>(ctx, o.rotate ? '/v1/webhooks/default/secret/rotate' : '/v1/webhooks/default/secret', {
        method: o.rotate ? 'POST' : 'GET',
      });
      out(s, () => console.log(s.key));
    });
}
