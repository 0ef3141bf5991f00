/**
 * The ONNX Runtime engine on the real ISNet (small, uint8) model: native inference, no Temporal involved.
 *
 * @jest-environment ./test/native-typed-arrays-environment.js
 */
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadSharp, OnnxEngine } from '../../engines/onnx/engine';
import { buildIsnetModel, ISNET_VARIANTS, imglyDistDir } from '../../engines/onnx/isnet-weights';

jest.setTimeout(60_000);

const W = 300;
const H = 200;
const CIRCLE = { x: 150, y: 100, r: 60 };
const inCircle = (x: number, y: number) => (x + 0.5 - CIRCLE.x) ** 2 + (y + 0.5 - CIRCLE.y) ** 2 <= CIRCLE.r ** 2;

let dir: string;
let modelFile: string;
// One thread, as the suite's engines run (infra/test.sh): beside the other lanes a second one spins
// while it waits (23 against 19 CPU-s for this file on a busy two-core box).
const engine = new OnnxEngine({ gpu: 'false', threads: 1 });

/** A saturated red circle on white, as a PNG. */
async function redCircle(): Promise<Buffer> {
  const sharp = await loadSharp();
  const pixels = Buffer.alloc(W * H * 3, 255);
  for (let y = 0; y < H; y += 1) {
    for (let x = 0; x < W; x += 1) {
      if (inCircle(x, y)) pixels.set([255, 0, 0], (y * W + x) * 3);
    }
  }
  return sharp(pixels, { raw: { width: W, height: H, channels: 3 } })
    .png()
    .toBuffer();
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-onnx-'));
  modelFile = path.join(dir, 'isnet-small.onnx');
  const built = await buildIsnetModel('small', modelFile);
  expect(built.size).toBe(ISNET_VARIANTS.small.size);
  expect(built.sha256).toMatch(/^[0-9a-f]{64}$/);
  await engine.load('v1', modelFile);
});

afterAll(async () => {
  await engine.dispose();
  await rm(dir, { recursive: true, force: true });
});

test('the red circle stays, the white background becomes transparent', async () => {
  const sharp = await loadSharp();
  expect(engine.isLoaded('v1')).toBe(true);
  expect(engine.providers('v1')).toEqual(['cpu']);
  const result = await engine.removeBackground('v1', await redCircle());
  expect(result).toMatchObject({ width: W, height: H });
  expect(result.seconds).toBeGreaterThan(0);

  const meta = await sharp(result.png).metadata();
  expect(meta).toMatchObject({ format: 'png', width: W, height: H, channels: 4, hasAlpha: true });
  const { data, info } = await sharp(result.png).raw().toBuffer({ resolveWithObject: true });
  expect(info.channels).toBe(4);
  const pixel = (x: number, y: number) => [...data.subarray((y * W + x) * 4, (y * W + x) * 4 + 4)];
  const alpha = (x: number, y: number) => data[(y * W + x) * 4 + 3];

  let transparent = 0;
  let opaque = 0;
  const inside = { all: 0, opaque: 0 };
  const outside = { all: 0, opaque: 0, clear: 0 };
  for (let y = 0; y < H; y += 1) {
    for (let x = 0; x < W; x += 1) {
      const a = alpha(x, y);
      if (a < 50) transparent += 1;
      if (a > 200) opaque += 1;
      const side = inCircle(x, y) ? inside : outside;
      side.all += 1;
      if (a > 200) side.opaque += 1;
      if (a < 50 && side === outside) outside.clear += 1;
    }
  }
  expect(transparent).toBeGreaterThan(W * H * 0.3);
  expect(opaque).toBeGreaterThan(W * H * 0.1);
  // The circle is kept whole. The uint8 model leaves speckles in a flat background (the same
  // with ONNX Runtime 1.17, which @imgly uses; the fp16 model has none), hence the looser bounds outside.
  expect(inside.opaque / inside.all).toBeGreaterThan(0.95);
  expect(outside.opaque / outside.all).toBeLessThan(0.05);
  expect(outside.clear / outside.all).toBeGreaterThan(0.6);

  const centre = alpha(CIRCLE.x, CIRCLE.y);
  expect(centre).toBeGreaterThan(200);
  expect(alpha(0, 0)).toBeLessThan(50);
  for (const [x, y] of [
    [0, 0],
    [W - 1, 0],
    [0, H - 1],
    [W - 1, H - 1],
  ]) {
    expect(centre).toBeGreaterThan(alpha(x, y) + 150);
  }
  // The colours are the original's; only alpha is new.
  expect(pixel(CIRCLE.x, CIRCLE.y).slice(0, 3)).toEqual([255, 0, 0]);
});

test('bytes that are no image are an InvalidInput failure', async () => {
  await expect(engine.removeBackground('v1', Buffer.from('this is not an image at all'))).rejects.toMatchObject({
    name: 'EngineError',
    type: 'InvalidInput',
  });
  await expect(engine.removeBackground('v1', Buffer.alloc(0))).rejects.toMatchObject({ type: 'InvalidInput' });
  // A PNG signature followed by garbage: recognised, then undecodable.
  const truncated = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(64, 7)]);
  await expect(engine.removeBackground('v1', truncated)).rejects.toMatchObject({ type: 'InvalidInput' });
});

test('an aborted call does not run', async () => {
  await expect(engine.removeBackground('v1', await redCircle(), AbortSignal.abort())).rejects.toThrow(/abort/i);
});

/** The longest gap between ticks of a 10 ms timer while `work` runs: how long the event loop was held. */
async function longestStall<T>(work: () => Promise<T>): Promise<{ value: T; stallMs: number; ticks: number }> {
  let last = performance.now();
  let stallMs = 0;
  let ticks = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    stallMs = Math.max(stallMs, now - last);
    last = now;
    ticks += 1;
  }, 10);
  try {
    const value = await work();
    stallMs = Math.max(stallMs, performance.now() - last);
    return { value, stallMs, ticks };
  } finally {
    clearInterval(timer);
  }
}

test('inference runs off the event loop: timers keep firing while a run takes its seconds', async () => {
  const image = await redCircle();
  const { value, stallMs, ticks } = await longestStall(() => engine.removeBackground('v1', image));
  const runMs = value.seconds * 1000;
  console.log(`run ${runMs.toFixed(0)} ms, longest event-loop stall ${stallMs.toFixed(0)} ms, ${ticks} ticks`);
  // On the engine's thread the run held the loop for nearly all of its time (ISNet alone is most of it).
  expect(stallMs).toBeLessThan(runMs / 3);
  expect(ticks).toBeGreaterThan(runMs / 10 / 4);
});

test('an abort during the run ends the call at once; the session serves the next run', async () => {
  const image = await redCircle();
  const controller = new AbortController();
  const started = performance.now();
  const call = engine.removeBackground('v1', image, controller.signal);
  setTimeout(() => controller.abort(new Error('canceled by the client')), 300);
  await expect(call).rejects.toThrow(/canceled by the client/);
  const abortedAfterMs = performance.now() - started;
  const next = await engine.removeBackground('v1', image);
  console.log(`aborted after ${abortedAfterMs.toFixed(0)} ms; the next run took ${(next.seconds * 1000).toFixed(0)} ms`);
  // The abort did not wait for the run it cut short: the next call's run (its own run, after
  // what was left of the aborted one) takes longer than the aborted call did.
  expect(abortedAfterMs).toBeLessThan(next.seconds * 1000);
  expect(next.width).toBe(W);
});

test('a version that is not loaded is an error, not a crash', async () => {
  await expect(engine.removeBackground('nope', await redCircle())).rejects.toThrow(/not loaded/);
});

test('a missing, tiny or non-ONNX model file is a ModelLoadFailed failure', async () => {
  const other = new OnnxEngine({ gpu: 'false', threads: 1 });
  try {
    await expect(other.load('missing', path.join(dir, 'nope.onnx'))).rejects.toMatchObject({ type: 'ModelLoadFailed' });
    const tiny = path.join(dir, 'tiny.onnx');
    await writeFile(tiny, Buffer.alloc(100));
    await expect(other.load('tiny', tiny)).rejects.toMatchObject({ type: 'ModelLoadFailed' });
    const junk = path.join(dir, 'junk.onnx');
    await writeFile(junk, Buffer.alloc(2 * 2 ** 20, 0xff));
    await expect(other.load('junk', junk)).rejects.toMatchObject({ type: 'ModelLoadFailed', message: /could not load/ });
    expect(other.isLoaded('junk')).toBe(false);
  } finally {
    await other.dispose();
  }
});

test('a corrupted chunk fails the build and leaves no model file behind', async () => {
  const real = imglyDistDir();
  const fake = path.join(dir, 'dist');
  await rm(fake, { recursive: true, force: true });
  await mkdir(fake);
  const resources = JSON.parse(await readFile(path.join(real, 'resources.json'), 'utf8'));
  await writeFile(path.join(fake, 'resources.json'), JSON.stringify(resources));
  const chunks: string[] = resources[ISNET_VARIANTS.small.key].chunks.map((c: { hash: string }) => c.hash);
  for (const hash of chunks) await symlink(path.join(real, hash), path.join(fake, hash));
  // One byte changed in the third chunk.
  const victim = path.join(fake, chunks[2]);
  await rm(victim);
  await copyFile(path.join(real, chunks[2]), victim);
  const bytes = await readFile(victim);
  bytes[1000] ^= 0xff;
  await writeFile(victim, bytes);

  const out = path.join(dir, 'corrupt.onnx');
  await expect(buildIsnetModel('small', out, { distDir: fake })).rejects.toThrow(/chunk 2 .* has sha256/);
  const left = (await readdir(dir)).filter((f) => f.startsWith('corrupt.onnx'));
  expect(left).toEqual([]);
});
