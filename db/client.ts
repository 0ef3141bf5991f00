import path from 'node:path';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import * as schema from './schema';

export type Db = ReturnType<typeof drizzle<typeof schema>> & { $client: postgres.Sql };

export function createDb(url: string, options: { max?: number } = {}): Db {
  const sql = postgres(url, { max: options.max ?? 10, onnotice: () => {} });
  return drizzle(preparedQueries(sql), { schema }) as Db;
}

/** A client of its own for LISTEN (api/event-hub.ts): ended and made anew when its connection is lost. */
export function listenClient(url: string): postgres.Sql {
  return postgres(url, { max: 1, onnotice: () => {} });
}

/**
 * Drizzle sends every query unprepared, and postgres.js then asks the server for an unprepared
 * query's parameter types before it sends the values: two round trips for each query, and a parse
 * and plan on the server each time. Prepared, a query is one round trip after its first on a
 * connection (postgres.js keeps the statement per connection, and prepares it again when a
 * migration invalidates it). This hands drizzle a client whose parameterized queries, in
 * transactions and savepoints too, are prepared.
 */
export function preparedQueries(sql: postgres.Sql): postgres.Sql {
  type Unsafe = (query: string, args?: unknown[], options?: Record<string, unknown>) => unknown;
  return new Proxy(sql, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'unsafe') {
        const unsafe = value as Unsafe;
        return (query: string, args?: unknown[], opts?: Record<string, unknown>) =>
          Array.isArray(args) && args.length > 0 ? unsafe(query, args, { ...opts, prepare: true }) : unsafe(query, args, opts);
      }
      if (prop === 'begin' || prop === 'savepoint') {
        const scoped = value as (...args: unknown[]) => unknown;
        return (...args: unknown[]) => {
          const fn = args.pop() as (tx: postgres.Sql) => unknown;
          return scoped(...args, (tx: postgres.Sql) => fn(preparedQueries(tx)));
        };
      }
      return value;
    },
  });
}

/** A database handle: the pool, or a transaction's connection. */
type Handle = Pick<Db, 'select'>;

/**
 * A query drizzle builds once, with `sql.placeholder`s where its values go, then only executes.
 * Drizzle builds a query's text anew on every call, walking the schema's columns, and on the hot
 * path that cost more CPU than the round trip it makes (a sixth of the API's CPU per create, in
 * a profile of `npm run bench -- floor`). The built statement runs on whichever handle it is
 * given, a transaction's too: drizzle's prepared query sends its text through its `client`, the
 * handle's connection, and nothing else in it depends on where it was built.
 */
export function builtOnce<Q extends { execute(values?: Record<string, unknown>): Promise<unknown> }>(
  build: (db: Db) => Q,
): (db: Handle) => Q {
  let built: Q | undefined;
  return (db) => {
    built ??= build(db as Db);
    const client = (db as unknown as { session: { client: postgres.Sql } }).session.client;
    return Object.create(built, { client: { value: client } }) as Q;
  };
}

export async function closeDb(db: Db): Promise<void> {
  await db.$client.end({ timeout: 5 });
}

export async function migrateDb(db: Db): Promise<void> {
  await migrate(db, { migrationsFolder: path.join(__dirname, 'migrations') });
}
