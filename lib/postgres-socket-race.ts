/**
 * postgres.js 3.4 can throw from a timer after Postgres closed a connection under it
 * (`TypeError: Cannot read properties of null (reading 'write')` in connection.js: upstream
 * porsager/postgres #1154 and #1208, fixes not released). The exception escapes every promise,
 * so it would kill the process when Postgres restarts. Only that exception is survived: the
 * dead connection's query fails or times out and the caller retries (activities do). Anything
 * else still ends the process, as Node would.
 */
import type { Logger } from './logger';

export function isPostgresSocketRace(err: unknown): boolean {
  return (
    err instanceof TypeError &&
    /reading 'write'/.test(err.message) &&
    /postgres[/\\](?:cjs[/\\])?src[/\\]connection\.js/.test(err.stack ?? '')
  );
}

export function surviveRestartsOfPostgres(logger: Logger): void {
  process.on('uncaughtException', (err) => {
    if (isPostgresSocketRace(err)) {
      logger.warn({ err: err.message }, 'a Postgres connection closed under a pending write (postgres.js race); carrying on');
      return;
    }
    logger.fatal({ err }, 'uncaught exception');
    console.error(err);
    process.exit(1);
  });
}
