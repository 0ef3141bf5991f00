/**
 * `npm run gguf -- --out model.gguf --type Q8_0 --embedding 768 --layers 12`: a random-weight LLaMA GGUF.
 * `npm run gguf -- --out adapter.gguf --lora-for model.gguf --rank 8`: a random LoRA adapter for that base.
 */
import { Command, InvalidArgumentError } from 'commander';
import { llamaSpecSchema, TENSOR_TYPES, type WrittenModel, writeLlamaGguf } from './gguf-writer';
import { baseShapeOf, loraSpecSchema, writeLoraGguf } from './lora-writer';

const int = (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n)) throw new InvalidArgumentError('expected an integer');
  return n;
};

const program = new Command('gguf')
  .description('Write a LLaMA-architecture GGUF file with seeded random weights')
  .requiredOption('-o, --out <file>', 'where to write the model')
  .option('--type <type>', `tensor type: ${TENSOR_TYPES.join(', ')}`, 'F32')
  .option('--embedding <n>', 'embedding length (multiple of 32)', int, 64)
  .option('--layers <n>', 'transformer blocks', int, 2)
  .option('--heads <n>', 'attention heads', int, 4)
  .option('--kv-heads <n>', 'key/value heads (grouped-query attention)', int)
  .option('--feed-forward <n>', 'feed-forward length (multiple of 32)', int, 128)
  .option('--context <n>', 'training context length', int, 2048)
  .option('--vocab-words <n>', 'word pieces after the byte tokens', int, 200)
  .option('--seed <n>', 'random seed', int, 42)
  .option('--name <name>', 'general.name')
  .option('--lora-for <base.gguf>', 'write a LoRA adapter for this base model instead (its shape comes from the file)')
  .option('--rank <n>', 'LoRA rank (with --lora-for)', int, 8)
  .option('--alpha <n>', 'LoRA alpha (with --lora-for; default: the rank, full strength)', Number)
  .option(
    '--residual-scale <x>',
    'what each block adds to the residual stream (under 1: a quantized copy picks the same tokens, e.g. as a draft model)',
    Number,
    1,
  )
  .option(
    '--bigram <x>',
    'how strongly each word points at one fixed next word (0: not at all; about 1 with a small --residual-scale: a draft with fewer --layers and the same --seed picks the same tokens)',
    Number,
    0,
  )
  .action(async (o) => {
    const started = performance.now();
    const report = (written: WrittenModel) =>
      console.log(
        `${o.out}: ${(written.size / 2 ** 20).toFixed(1)} MiB, ${written.parameters.toLocaleString()} parameters, sha256 ${written.sha256} ` +
          `(${((performance.now() - started) / 1000).toFixed(2)} s)`,
      );
    if (o.loraFor) {
      const lora = loraSpecSchema.safeParse({
        name: o.name,
        base: await baseShapeOf(o.loraFor),
        rank: o.rank,
        alpha: o.alpha,
        seed: o.seed,
      });
      if (!lora.success) return program.error(lora.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`).join('\n'));
      return report(await writeLoraGguf(o.out, lora.data));
    }
    const parsed = llamaSpecSchema.safeParse({
      name: o.name ?? 'kiln-random-llama',
      embedding: o.embedding,
      layers: o.layers,
      heads: o.heads,
      kvHeads: o.kvHeads,
      feedForward: o.feedForward,
      contextLength: o.context,
      vocabWords: o.vocabWords,
      type: o.type,
      seed: o.seed,
      residualScale: o.residualScale,
      bigram: o.bigram,
    });
    if (!parsed.success) {
      return program.error(parsed.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`).join('\n'));
    }
    report(await writeLlamaGguf(o.out, parsed.data));
  });

program.parseAsync().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
