/** `npm run bench -- <scenario>`: figures from the benchmarks' own stack, which infra/bench.sh starts with fixtures on. */
import os from 'node:os';
import { Command, Option } from 'commander';
import { DEFAULT_DRAFT_TOKENS } from '../engines/llama/speculative';
import { archiveCost } from './archive';
import { BATCHING_MODELS, batching } from './batching';
import { chatAgreement } from './chat-agreement';
import { coldStart } from './cold-start';
import { embeddingQuality } from './embedding-quality';
import { fairness } from './fairness';
import { floorScenario } from './floor';
import { historySize } from './history-size';
import { idle } from './idle';
import { kvContinue } from './kv-continue';
import { kvReplay } from './kv-replay';
import { kvSnapshot } from './kv-snapshot';
import { overhead } from './overhead';
import { pd } from './pd';
import { defaultThreads, prefixCache } from './prefix-cache';
import { responsesBench } from './responses';
import { speculative } from './speculative';
import { streamIsolation } from './stream-isolation';
import { streaming } from './streaming';
import { sustained } from './sustained';
import { visibilityCost } from './visibility';
import { webhookLatency } from './webhooks';

const int = (v: string) => Number.parseInt(v, 10);
const program = new Command('bench').description('Kiln benchmarks; each prints a table and writes JSON under .data/bench-stack/bench/');

program
  .command('floor')
  .description(
    'kiln/echo-fixture next to a bare one-activity Temporal workflow on the same server: CPU per prediction by process, throughput, latency, ratios',
  )
  .option('-n, --requests <n>', 'predictions (and bare workflows) per concurrency level', int, 200)
  .option('-c, --concurrency <list>', 'concurrency levels', (v) => v.split(',').map(int), [16, 1])
  .option(
    '-r, --rounds <n>',
    'turns Kiln and the floor take, each with its share of the predictions (the machine drifts alike for both)',
    int,
    4,
  )
  .action((o) => floorScenario({ requests: o.requests, concurrency: o.concurrency, rounds: o.rounds }));

program
  .command('archive')
  .description("what Kiln's history archive costs a prediction (one reconciler look over -n runs), beside the floor's bare workflow")
  .option('-n, --requests <n>', 'predictions whose histories are copied', int, 400)
  .action((o) => archiveCost({ requests: o.requests }));

program
  .command('visibility')
  .description("what a prediction's search attributes and patch marker cost Temporal, on the floor's own workflow, bare and with each")
  .option('-n, --requests <n>', 'workflows of each variant', int, 1000)
  .option('-r, --rounds <n>', 'turns each variant takes', int, 5)
  .action((o) => visibilityCost({ requests: o.requests, rounds: o.rounds }));

program
  .command('overhead')
  .description('total_time − predict_time of warm predictions, next to node-llama-cpp directly')
  .option('-n, --requests <n>', 'predictions per concurrency level', int, 100)
  .option('-c, --concurrency <list>', 'concurrency levels', (v) => v.split(',').map(int), [1, 8, 32])
  .action((o) => overhead({ requests: o.requests, concurrency: o.concurrency }));

program
  .command('sustained')
  .description('open-loop load at fixed rates on kiln/echo-fixture: the highest rate with p99 < 1 s, and CPU by component')
  .option(
    '-r, --rates <list>',
    'arrival rates per second, tried in order until one is not sustained',
    (v) => v.split(',').map(int),
    [5, 10, 20, 40, 60, 100],
  )
  .option('-d, --seconds <n>', 'seconds at each rate', int, 60)
  .option('-s, --sleep-ms <n>', 'fixture work per prediction', int, 0)
  .action((o) => sustained({ rates: o.rates, seconds: o.seconds, sleepMs: o.sleepMs }));

program
  .command('webhooks')
  .description('completed_at → completed webhook received, p50/p99')
  .option('-n, --requests <n>', 'predictions', int, 50)
  .option('-c, --concurrency <n>', 'at once', int, 4)
  .action((o) => webhookLatency({ requests: o.requests, concurrency: o.concurrency }));

program
  .command('idle')
  .description("an idle stack's CPU by process, as a share of one core (no predictions)")
  .option('--settle <s>', 'seconds to wait before measuring', int, 20)
  .option('-s, --seconds <s>', 'seconds measured', int, 60)
  .action((o) => idle({ settleSeconds: o.settle, seconds: o.seconds }));

program
  .command('streaming')
  .description('time to first streamed token and tokens/s through SSE, next to node-llama-cpp directly')
  .option('-r, --runs <n>', 'streams', int, 10)
  .option('-t, --tokens <n>', 'tokens per stream', int, 256)
  .option('-c, --concurrency <list>', 'concurrent streams for the batching table', (v) => v.split(',').map(int), [1, 4])
  .action((o) => streaming({ runs: o.runs, tokens: o.tokens, concurrency: o.concurrency }));

program
  .command('responses')
  .description(
    'the Responses API on kiln/smollm2-135m-instruct through the openai client: time to first text delta of a /responses stream ÷ a /chat/completions one (interleaved, warm; target ≤ 1.1×), and a previous_response_id chain: input, cached and recomputed tokens per turn (target ≤ new + 16)',
  )
  .option('-n, --pairs <n>', 'interleaved /responses and /chat/completions streams (pairs)', int, 24)
  .option('-t, --tokens <n>', 'most tokens of each timed stream', int, 16)
  .option('--turns <n>', 'turns of the chain', int, 10)
  .option('--turn-tokens <n>', 'max_output_tokens of each turn', int, 32)
  .action((o) => responsesBench({ pairs: o.pairs, tokens: o.tokens, turns: o.turns, turnTokens: o.turnTokens }));

program
  .command('stream-isolation')
  .description(
    "another account's read p90 alone and while one account holds SSE streams up to its cap on a generating kiln/tiny-llama prediction, interleaved; the ratio beside its 1.2x floor",
  )
  .option('-n, --requests <n>', 'quiet reads per phase and round', int, 50)
  .option('-r, --rounds <n>', 'rounds of the two phases', int, 10)
  .option('-t, --tokens <n>', 'tokens each noisy prediction generates', int, 1000)
  .action((o) => streamIsolation({ requests: o.requests, rounds: o.rounds, tokens: o.tokens }));

program
  .command('fairness')
  .description('a quiet account under a noisy flood (fairness on and off), Jain’s index, 2:1 weights; uses kiln/echo-fixture')
  .option('-f, --flood <n>', 'predictions in the flood', int, 200)
  .option('-q, --quiet <n>', 'quiet predictions, --gap-ms apart', int, 10)
  .option('-g, --gap-ms <n>', 'between quiet predictions (default: 1.5 × the work, at least 300)', int)
  .option('-s, --sleep-ms <n>', 'fixture work per prediction', int, 200)
  .option('-j, --jitter <share>', 'fixture work varies by ± this share of it (0.5: 50–150%)', Number, 0)
  .action((o) => fairness({ flood: o.flood, quiet: o.quiet, sleepMs: o.sleepMs, jitter: o.jitter, gapMs: o.gapMs }));

program
  .command('cold-start')
  .description('cold (download + load), cold from the disk cache and warm, next to the raw S3 GET and llama.cpp load floors')
  .option('--sizes <list>', 'model sizes in MB', (v) => v.split(',').map(int), [100, 500])
  .action((o) => coldStart({ sizes: o.sizes }));

program
  .command('history')
  .description(
    'workflow history size (bytes, events, largest payload) of one warm tiny-llama and remove-background predictions (small and 3 MB image)',
  )
  .option('-n, --runs <n>', 'predictions per case', int, 5)
  .action((o) => historySize({ runs: o.runs }));

program
  .command('batching')
  .description(
    "aggregate tokens/s at N concurrent streams: llama.cpp's own llama-batched-bench (built once from the shipped source) beside Kiln's engine direct and through the API",
  )
  .addOption(new Option('-m, --model <name>', 'generated model').choices(Object.keys(BATCHING_MODELS)).default('226m'))
  .option('-s, --sequences <list>', 'concurrent streams', (v) => v.split(',').map(int), [1, 4, 16])
  .option('-t, --tokens <n>', 'tokens generated per stream', int, 128)
  .option('-p, --prompt-tokens <n>', 'prompt tokens per stream', int, 32)
  .option('-r, --rounds <n>', 'rounds (the table shows the median)', int, 1)
  .option(
    '--threads <n>',
    "CPU threads for llama.cpp and the direct engine (the engine worker's KILN_ENGINE_THREADS)",
    int,
    defaultThreads(),
  )
  .option(
    '--floor-threads <n>',
    "CPU threads for llama-batched-bench (default: all cores, issue 31's floor)",
    int,
    os.availableParallelism(),
  )
  .option('--skip-api', 'only llama.cpp and the engine direct (no running stack needed)', false)
  .option(
    '--ttft-prompt-tokens <n>',
    "time to first token for a cold prompt of n tokens beside llama.cpp's prompt time (0 skips it)",
    int,
    1000,
  )
  .action((o) =>
    batching({
      model: o.model,
      sequences: o.sequences,
      tokens: o.tokens,
      promptTokens: o.promptTokens,
      rounds: o.rounds,
      threads: o.threads,
      floorThreads: o.floorThreads,
      skipApi: o.skipApi,
      ttftPromptTokens: o.ttftPromptTokens,
    }),
  );

program
  .command('speculative')
  .description(
    'greedy tokens/s of an F32 model with and without its own weights in Q8_0 as draft, next to node-llama-cpp direct without a draft (no running stack needed)',
  )
  .option('-t, --tokens <n>', 'tokens generated per run', int, 128)
  .option('-r, --runs <n>', 'runs of each (the table shows the median)', int, 3)
  // The engine's defaults (a draft of 16, waited for); without waiting the target outruns the draft.
  .option('--draft-tokens <n>', 'most tokens drafted ahead at a time', int, DEFAULT_DRAFT_TOKENS)
  .option('--min-draft-tokens <n>', 'tokens the target waits for before it checks a draft (default: --draft-tokens)', int)
  .option('--threads <n>', "CPU threads for llama.cpp (the engine worker's KILN_ENGINE_THREADS)", int, defaultThreads())
  .action((o) =>
    speculative({
      tokens: o.tokens,
      runs: o.runs,
      threads: o.threads,
      draftTokens: o.draftTokens,
      minDraftTokens: o.minDraftTokens ?? o.draftTokens,
    }),
  );

program
  .command('prefix-cache')
  .description('time to first token after a ~2,000-token shared prefix, cold and cached, through the API and node-llama-cpp directly')
  .option('-r, --runs <n>', 'cold/cached pairs per path (the table shows the median)', int, 5)
  .option('-p, --prefix-tokens <n>', 'tokens in the shared prefix', int, 2000)
  .option('--threads <n>', "CPU threads for the direct floor (the engine worker's KILN_ENGINE_THREADS)", int, defaultThreads())
  .action((o) => prefixCache({ runs: o.runs, prefixTokens: o.prefixTokens, threads: o.threads }));

program
  .command('pd')
  .description(
    "prefill/decode disaggregation: decoding streams' time per output token (p50, p99) with long prompts arriving at a fixed rate and without, the long prompts' TTFT and aggregate tokens/s, one `both` node on all cores against a `prefill` and a `decode` node on a core each (taskset); run with KILN_PREFILL_SPLIT_MIN_TOKENS below a quarter of the prompt tokens",
  )
  .option('-d, --seconds <n>', 'seconds of each phase', int, 30)
  .option('-s, --streams <n>', 'decoding streams kept going', int, 4)
  .option('-t, --stream-tokens <n>', 'tokens each stream prediction generates', int, 64)
  .option('-p, --prompt-tokens <n>', 'tokens of each long prompt', int, 2000)
  .option(
    '-i, --interval <s>',
    "seconds between long prompts: 5 leaves one core's prefill of a 2,000-token prompt (2.2 s measured here) room to keep up; at 3 its queue grows (docs/benchmarks.md)",
    Number,
    5,
  )
  .action((o) =>
    pd({ seconds: o.seconds, streams: o.streams, streamTokens: o.streamTokens, promptTokens: o.promptTokens, intervalS: o.interval }),
  );

program
  .command('kv-snapshot')
  .description(
    "what a prefix's KV snapshot costs with llama.cpp's sequence state files: cold prefill, save, bytes per token, restore, and greedy agreement after it; then a restore from object storage on a node that never saw the prefix, against its floors (the shared MinIO, no API stack)",
  )
  .option('-r, --runs <n>', 'snapshots per prefix length (the table shows medians)', int, 3)
  .option('-p, --prefix-tokens <list>', 'prefix lengths in tokens', (v) => v.split(',').map(int), [500, 2000])
  .option('--threads <n>', "CPU threads (the engine worker's KILN_ENGINE_THREADS)", int, defaultThreads())
  .option('--model <gguf>', 'a GGUF to measure instead of the generated prefix-cache model')
  .option('--no-object-tier', 'skip the object-storage rows (they need the shared MinIO: bash infra/services.sh)')
  .action((o) => kvSnapshot({ runs: o.runs, prefixTokens: o.prefixTokens, threads: o.threads, model: o.model, objectTier: o.objectTier }));

program
  .command('kv-continue')
  .description(
    "a greedy kiln/tiny-llama generation whose engine is killed at a quarter: output identical to an uninterrupted run, the stream, and kill → done ÷ the remaining tokens' uninterrupted time; then what KV checkpoints cost N streams on the engine directly",
  )
  .option('-t, --tokens <n>', 'tokens generated', int, 1500)
  .option('-s, --streams <n>', 'streams at once for the checkpoint-cost rows', int, 4)
  .option('--threads <n>', "CPU threads for the direct rows (the engine worker's KILN_ENGINE_THREADS)", int, defaultThreads())
  .option('--skip-api', 'only the checkpoint-cost rows on the engine directly (no running stack needed)', false)
  .action((o) => kvContinue({ tokens: o.tokens, streams: o.streams, threads: o.threads, skipApi: o.skipApi }));

program
  .command('kv-replay')
  .description(
    'prefix-cache hit rate of multi-turn chats replayed over 3 versions on 3 engine nodes started here, every version scaled to zero between sessions and placed on another node after: cached ÷ prompt tokens with the KV snapshot tiers on, and off beside it',
  )
  .option('-s, --sessions <n>', 'sessions (every version unloaded between two)', int, 3)
  .option('-t, --turns <n>', 'turns of each conversation per session', int, 3)
  .option('-c, --conversations <n>', 'conversations per version', int, 2)
  .option('--context-words <n>', "words of each conversation's opening context", int, 450)
  .option('--turn-words <n>', 'words of each user turn', int, 30)
  .option('--reply-tokens <n>', 'tokens of each reply at most', int, 32)
  .action((o) =>
    kvReplay({
      sessions: o.sessions,
      turns: o.turns,
      conversations: o.conversations,
      contextWords: o.contextWords,
      turnWords: o.turnWords,
      replyTokens: o.replyTokens,
    }),
  );

program
  .command('embedding-quality')
  .description(
    "kiln/minilm through Kiln's engine: cosine similarity of labelled same-topic and different-topic sentence pairs, their ROC AUC, and agreement with a numpy float64 reference (no running stack needed)",
  )
  .option('--threads <n>', "CPU threads for llama.cpp (the engine worker's KILN_ENGINE_THREADS)", int, defaultThreads())
  .option('--no-reference', 'skip bench/embedding-reference.py')
  .action((o) => embeddingQuality({ threads: o.threads, reference: o.reference }));

program
  .command('chat-agreement')
  .description(
    "the fixed conversations of bench/chat-agreement/conversations.json through llama.cpp's own llama-server (built once from the shipped source) and Kiln's engine: prompt tokens, greedy replies, known answers (no running stack needed)",
  )
  .option('-t, --max-tokens <n>', 'most tokens of each reply', int, 64)
  .option('--threads <n>', "CPU threads for llama-server and the engine (the engine worker's KILN_ENGINE_THREADS)", int, defaultThreads())
  .option('--server <path>', 'a llama-server binary (default: infra/llama-server.sh builds one into the per-user cache)')
  .option('--only <names>', 'only the conversations whose names contain one of these (comma-separated)', (v) => v.split(','))
  .action((o) => chatAgreement({ maxTokens: o.maxTokens, threads: o.threads, server: o.server, only: o.only }));

program.parseAsync().then(
  () => process.exit(0),
  (err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
