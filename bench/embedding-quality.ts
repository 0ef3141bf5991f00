/**
 * Do kiln/minilm's embeddings mean something? The labelled sentence pairs of embedding-pairs.json
 * (same topic or not) are embedded by Kiln's engine (LlamaEngine.embed, what the embeddings task
 * runs) from the cached GGUF, and their cosine similarities should separate the two kinds: the ROC
 * AUC (target ≥ 0.9). Where the converters' virtual environment is there, the same sentences go
 * through bench/embedding-reference.py too (all-MiniLM-L6-v2 in numpy float64, as
 * sentence-transformers computes it), and each of Kiln's vectors is compared with the reference's
 * (cosine, target ≥ 0.99). Figures only, no assertions; no running stack needed.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { LlamaEngine } from '../engines/llama/engine';
import { trainedModelPath, trainedModels } from '../infra/trained-models';
import { kilnCache } from '../lib/llama-cpu-build';
import { cosineSimilarity } from '../lib/vectors';
import { rocAuc, saveResult, table } from './lib';

const MODEL = 'minilm';
const PAIRS_FILE = path.join(__dirname, 'embedding-pairs.json');
const REFERENCE = path.join(__dirname, 'embedding-reference.py');

interface Pair {
  a: string;
  b: string;
  same: boolean;
  topic: string;
  /** A different-topic pair whose sentences share a word with two meanings ("bank", "crane"). */
  shared_word?: boolean;
}

/** The reference's unit vectors for `sentences`, or why there are none. */
function referenceVectors(sentences: string[]): Promise<{ vectors?: number[][]; skipped?: string }> {
  const python = path.join(kilnCache(), 'python', 'venv', 'bin', 'python');
  if (!existsSync(python)) return Promise.resolve({ skipped: `no ${python} (python3 infra/fetch-trained-models.py makes it)` });
  return new Promise((resolve) => {
    const child = execFile(
      python,
      [REFERENCE],
      { maxBuffer: 256 * 2 ** 20, env: { ...process.env, KILN_CACHE: kilnCache() } },
      (err, stdout, stderr) => {
        if (err) resolve({ skipped: `embedding-reference.py failed: ${stderr.trim().split('\n').at(-1) ?? err.message}` });
        else resolve({ vectors: (JSON.parse(stdout) as { vectors: number[][] }).vectors });
      },
    );
    child.stdin!.end(JSON.stringify({ sentences }));
  });
}

const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
const f4 = (v: number) => v.toFixed(4);

export async function embeddingQuality(opts: { threads: number; reference: boolean }) {
  const model = trainedModels().find((m) => m.name === MODEL)!;
  const file = trainedModelPath(model);
  if (!existsSync(file))
    throw new Error(`${file} is not there: npm start (or python3 infra/fetch-trained-models.py) fetches and converts it`);
  const pairs = (JSON.parse(readFileSync(PAIRS_FILE, 'utf8')) as { pairs: Pair[] }).pairs;
  const sentences = [...new Set(pairs.flatMap((p) => [p.a, p.b]))];

  const engine = new LlamaEngine({ gpu: 'auto', contextSize: model.settings.contextSize, sequences: 1, threads: opts.threads });
  let kiln: number[][];
  let embedMs: number;
  try {
    await engine.load(MODEL, file, model.settings);
    const t0 = performance.now();
    kiln = (await engine.embed(MODEL, sentences)).vectors;
    embedMs = performance.now() - t0;
  } finally {
    await engine.dispose();
  }
  const vectorOf = new Map(sentences.map((s, i) => [s, i]));
  const score = (vectors: number[][], p: Pair) => cosineSimilarity(vectors[vectorOf.get(p.a)!], vectors[vectorOf.get(p.b)!]);

  const reference = opts.reference ? await referenceVectors(sentences) : { skipped: '--no-reference' };
  const ref = reference.vectors;
  const kilnScores = pairs.map((p) => score(kiln, p));
  const refScores = ref && pairs.map((p) => score(ref, p));
  table(
    `kiln/${MODEL}: cosine similarity of each pair (Kiln's engine${ref ? ', and the numpy reference' : ''})`,
    pairs.map((p, i) => ({
      topic: p.topic,
      same: p.same ? 'yes' : 'no',
      kiln: f4(kilnScores[i]),
      ...(refScores ? { reference: f4(refScores[i]) } : {}),
    })),
  );

  const labels = pairs.map((p) => p.same);
  const same = kilnScores.filter((_, i) => labels[i]);
  const different = kilnScores.filter((_, i) => !labels[i]);
  const auc = rocAuc(kilnScores, labels);
  // The same-topic pairs against each kind of different-topic pair alone.
  const aucAgainst = (sharedWord: boolean) => {
    const kept = pairs.map((p, i) => i).filter((i) => pairs[i].same || !!pairs[i].shared_word === sharedWord);
    return rocAuc(
      kept.map((i) => kilnScores[i]),
      kept.map((i) => labels[i]),
    );
  };
  const norms = kiln.map((v) => Math.hypot(...v));
  const separation = {
    pairs: pairs.length,
    sameTopic: same.length,
    auc,
    aucOtherTopics: aucAgainst(false),
    aucSharedWord: aucAgainst(true),
    referenceAuc: refScores && rocAuc(refScores, labels),
    sameMean: mean(same),
    sameMin: Math.min(...same),
    differentMean: mean(different),
    differentMax: Math.max(...different),
  };
  console.log(
    `\nSeparation over ${pairs.length} pairs (${same.length} same topic): ROC AUC ${f4(auc)} (target ≥ 0.9` +
      (separation.referenceAuc === undefined ? ')' : `; the reference's ${f4(separation.referenceAuc)})`) +
      `; the same-topic pairs against the other topics' pairs alone ${f4(separation.aucOtherTopics)}, against the shared-word pairs alone ${f4(separation.aucSharedWord)}` +
      `\nCosine: same topic mean ${f4(separation.sameMean)}, min ${f4(separation.sameMin)}; different topic mean ${f4(separation.differentMean)}, max ${f4(separation.differentMax)}`,
  );
  console.log(
    `Vectors: ${sentences.length} sentences, ${kiln[0].length} dimensions, length ${f4(Math.min(...norms))}–${f4(Math.max(...norms))}; ` +
      `${(embedMs / sentences.length).toFixed(1)} ms a sentence on ${opts.threads} thread(s), one at a time`,
  );

  let agreement: { min: number; mean: number; sentences: number } | undefined;
  if (ref) {
    const cos = sentences.map((_, i) => cosineSimilarity(kiln[i], ref[i]));
    agreement = { min: Math.min(...cos), mean: mean(cos), sentences: sentences.length };
    const pairDiff = Math.max(...kilnScores.map((s, i) => Math.abs(s - refScores![i])));
    console.log(
      `Agreement with the numpy float64 reference (bench/embedding-reference.py): cosine of Kiln's vector and the reference's over ${sentences.length} sentences ` +
        `min ${agreement.min.toFixed(6)}, mean ${agreement.mean.toFixed(6)} (target ≥ 0.99); pair scores differ by at most ${pairDiff.toFixed(4)}`,
    );
  } else {
    console.log(`Reference skipped: ${reference.skipped}`);
  }
  const saved = await saveResult('embedding-quality', {
    model: `kiln/${MODEL}`,
    sha256: model.sha256,
    threads: opts.threads,
    separation,
    agreement,
    embedMsPerSentence: embedMs / sentences.length,
    kilnScores,
    refScores,
  });
  console.log(`\nsaved ${saved}`);
}
