/** The engine's in-flight ledger: what a restarted engine reports lost is on disk, and a short activity costs no write. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { InflightLedger } from '../../activities/inflight-ledger';
import { poll } from '../helpers';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'kiln-inflight-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const onDisk = (file: string): string[] =>
  existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Array<{ predictionId: string }>).map((a) => a.predictionId) : [];

test('an activity that ends before it is due to be recorded is never written', async () => {
  const file = path.join(dir, 'node.json');
  const ledger = new InflightLedger(file, 'node', 60_000);
  const forget = ledger.track(Buffer.from('token-short'), 'short');
  forget();
  await ledger.flushed();
  expect(existsSync(file)).toBe(false);
});

test('an activity still running when due is written, and written off when it ends', async () => {
  const file = path.join(dir, 'node.json');
  const ledger = new InflightLedger(file, 'node', 0);
  const forget = ledger.track(Buffer.from('token-long'), 'long');
  await poll(
    async () => onDisk(file),
    (ids) => ids.includes('long'),
  );
  forget();
  await ledger.flushed();
  await poll(
    async () => onDisk(file),
    (ids) => ids.length === 0,
  );
  const lost = await ledger.reportLost(async () => undefined);
  expect(lost).toEqual([]);
});
