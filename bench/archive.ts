/**
 * `npm run bench -- archive`: what Kiln's history archive (activities/history-archive.ts) costs a
 * prediction, beside the floor's bare workflow in the same run. It makes `-n` predictions of
 * kiln/echo-fixture, then, in this process, copies their histories as one reconciler look does
 * (a fresh memory, its mark just before them) into a bucket of its own (`<bucket>-archive`), reading CPU by
 * process around it. A steady look lists a run more than once (the overlap before its mark): the
 * cost of one more listing is measured apart, by listing the same runs again.
 */
import { Client, Connection } from '@temporalio/client';
import { ARCHIVE_PREFIX, ArchiveMemory, archiveClosedHistories, closedRuns } from '../activities/history-archive';
import { config } from '../lib/config';
import { Storage } from '../lib/storage';
import { cpuBetween, cpuByProcess } from './cpu';
import { Floor } from './floor/bare';
import { echoPrediction, historiesArchived } from './floor/compare';
import { apiToken, pool, saveResult, table } from './lib';

/** CPU ms per run of the archive's processes over `f`: Temporal, this process (the reconciler's part), MinIO. */
async function cpuPerRun(f: () => Promise<number>) {
  const before = cpuByProcess();
  const own = process.cpuUsage();
  const runs = await f();
  const cpu = cpuBetween(before, cpuByProcess());
  const mine = process.cpuUsage(own);
  const per = (s: number) => (runs > 0 ? (s * 1000) / runs : NaN);
  return { runs, temporal: per(cpu.temporal), reconciler: per((mine.user + mine.system) / 1e6), minio: per(cpu.minio) };
}

export async function archiveCost(opts: { requests: number }) {
  const token = await apiToken();
  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
  const client = new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default' });
  // A bucket of its own: the stack's reconciler keeps its own mark and bundles.
  const storage = Storage.fromConfig({ ...config(), S3_BUCKET: `${config().S3_BUCKET}-archive` });
  await storage.ensureBucket();
  const floor = await Floor.start();
  try {
    const from = new Date(Date.now() - 1_000);
    const ids = await pool(opts.requests, 16, async (i) => (await echoPrediction(token, `archive ${i}`, 0)).id);
    // Every run closed, and the stack's own reconciler past them: its later looks only list them.
    await historiesArchived(ids);
    const keys = async () => {
      const all = new Set<string>();
      for await (const page of storage.list(ARCHIVE_PREFIX)) for (const key of page) all.add(key);
      return all;
    };
    const earlier = await keys();
    const memory = new ArchiveMemory();
    memory.mark = from.toISOString();
    memory.wideAt = Date.now();
    const look = await cpuPerRun(async () => (await archiveClosedHistories(client, storage, 600_000, memory)).archived);
    // What each further look of the overlap costs a run: one listing. Short, and the stack's
    // reconciler may list beside it: the least of three.
    const listings = [];
    for (let i = 0; i < 3; i++) {
      listings.push(
        await cpuPerRun(async () => {
          let listed = 0;
          for await (const run of closedRuns(client, from)) if (run) listed += 1;
          return listed;
        }),
      );
    }
    const listed = listings.sort((a, b) => a.temporal + a.reconciler - (b.temporal + b.reconciler))[0];
    const bare = await floor.run(opts.requests, 16);
    const floorMs = (bare.stackCpu * 1000) / bare.requests;
    let bytes = 0;
    for (const key of await keys()) if (!earlier.has(key)) bytes += (await storage.size(key)) ?? 0;
    const total = look.temporal + look.reconciler + look.minio;
    const ms = (v: number) => v.toFixed(2);
    table(`The history archive: ${look.runs} predictions' runs copied in one look, beside ${bare.requests} bare workflows (16 at once)`, [
      {
        what: 'one look: list, fetch each history, one bundle',
        temporal: ms(look.temporal),
        'reconciler (this process)': ms(look.reconciler),
        minio: ms(look.minio),
        total: ms(total),
      },
      {
        what: 'each further listing of a run (looks within the overlap)',
        temporal: ms(listed.temporal),
        'reconciler (this process)': ms(listed.reconciler),
        minio: ms(listed.minio),
        total: ms(listed.temporal + listed.reconciler + listed.minio),
      },
      {
        what: 'floor: a bare workflow, whole stack',
        temporal: ms((bare.cpu.temporal * 1000) / bare.requests),
        'reconciler (this process)': '-',
        minio: '-',
        total: ms(floorMs),
      },
    ]);
    console.log(
      `archive ÷ floor: ${(total / floorMs).toFixed(2)}× of a bare workflow's CPU (one listing); bundle bytes per run: ${(bytes / look.runs).toFixed(0)}`,
    );
    console.log(`saved ${await saveResult('archive', { look, listed, floorMs, bytesPerRun: bytes / look.runs })}`);
  } finally {
    await floor.stop();
    await connection.close();
  }
}
