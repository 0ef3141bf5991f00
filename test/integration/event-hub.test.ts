/**
 * Open streams and waits are woken by the API's one LISTEN (api/event-hub.ts), with no poll of
 * their own to speak of: so the hub must not go deaf. Its connection goes through a proxy the
 * test cuts; once Postgres is reachable again the hub listens anew by itself and wakes every
 * subscriber to look again, since what was notified meanwhile is lost.
 */
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { EventHub } from '../../api/event-hub';
import { closeDb, type Db, listenClient } from '../../db/client';
import { EVENTS_CHANNEL } from '../../db/events';
import { newId } from '../../lib/ids';
import { poll, TEST_DATABASE_URL, testDb } from '../helpers';
import { startTcpProxy, type TcpProxy } from '../tcp-proxy';

jest.setTimeout(90_000);

let db: Db;
let proxy: TcpProxy;
let hub: EventHub;
/** The hub's warnings, as logged. */
const warnings: string[] = [];
beforeAll(async () => {
  db = testDb();
  const url = new URL(TEST_DATABASE_URL);
  proxy = await startTcpProxy(`${url.hostname}:${url.port || '5432'}`);
  const viaProxy = new URL(TEST_DATABASE_URL);
  [viaProxy.hostname, viaProxy.port] = proxy.address.split(':');
  const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) });
  hub = new EventHub(db.$client, logger, () => listenClient(viaProxy.toString()));
  await hub.start();
});
afterAll(async () => {
  await hub.stop();
  await proxy.close();
  await closeDb(db);
});

const notify = (payload: string) => db.execute(sql`select pg_notify(${EVENTS_CHANNEL}, ${payload})`);

test('after its connection is lost and Postgres is back, the hub hears again and every subscriber looks again', async () => {
  const id = newId();
  const wakes: Array<{ outputOnly: boolean; resync: boolean }> = [];
  const unsubscribe = hub.subscribe(id, (outputOnly, resync = false) => wakes.push({ outputOnly, resync }));
  try {
    await notify(`${id} output`);
    await poll(
      async () => wakes.length,
      (n) => n === 1,
    );
    expect(wakes[0]).toEqual({ outputOnly: true, resync: false });

    // postgres.js tries to listen again at once, is refused and gives up: only the hub's own check
    // brings it back. The cut lasts until the hub has noticed that it hears nothing.
    await proxy.cut();
    await notify(id); // lost: nobody listens
    await poll(
      async () => warnings.some((w) => w.includes('listening anew')),
      (noticed) => noticed,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    await proxy.restore();

    await poll(
      async () => wakes.filter((w) => w.resync).length,
      (n) => n >= 1,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const before = wakes.length;
    await poll(
      async () => {
        await notify(id);
        return wakes.slice(before).some((w) => !w.resync && !w.outputOnly);
      },
      (heard) => heard,
      { timeoutMs: 10_000, intervalMs: 500 },
    );
  } finally {
    unsubscribe();
  }
});

test("a prediction's notice mark changes with each of its notifications and no one else's", async () => {
  const id = newId();
  const other = newId();
  const wakes: boolean[] = [];
  const unsubscribe = hub.subscribe(id, () => wakes.push(true));
  try {
    const first = hub.noticeMark(id);
    await notify(`${other} output`);
    await notify(`${id} output`);
    await poll(
      async () => wakes.length,
      (n) => n === 1,
    );
    const second = hub.noticeMark(id);
    expect(second).not.toBe(first);
    const otherMark = hub.noticeMark(other);
    await notify(`${id} output`);
    await poll(
      async () => wakes.length,
      (n) => n === 2,
    );
    expect(hub.noticeMark(id)).not.toBe(second);
    expect(hub.noticeMark(other)).toBe(otherMark);
  } finally {
    unsubscribe();
  }
});
