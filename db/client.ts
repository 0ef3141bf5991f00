import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import path from 'node:path';
import postgres from 'postgres';
import * as schema from './schema';

export type Db = ReturnType<typeof drizzle<typeof schema>> & { $client: postgres.Sql };

export function createDb(url: string, options: { max?: number } = {}): Db {
  const sql = postgres(url, { max: options.max ?? 10, onnotice: () => {} });
  return drizzle(sql, { schema }) as Db;
}

export async function closeDb(db: Db): Promise<void> {
  await db.$client.end({ timeout: 5 });
}

export async function migrateDb(db: Db): Promise<void> {
  await migrate(db, { migrationsFolder: path.join(__dirname, 'migrations') });
}
