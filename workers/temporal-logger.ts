/**
 * Temporal's logs (the SDK's own, workflow `log`, activity `log`) go to the process's pino logger,
 * with `predictionId` (or `batchId`) lifted from the workflow id, so that every line about a prediction — in the
 * control worker, the engine worker and the API — can be found with one grep or one log query.
 */
import type { LogLevel, LogMetadata, Logger as TemporalLogger } from '@temporalio/common';
import type { Logger } from '../lib/logger';

/** What a workflow is about, from its id: `prediction-<id>`, `webhook-<id>-<event>-…`, `batch-<id>`. */
export function subjectOf(workflowId: unknown): { predictionId: string } | { batchId: string } | Record<string, never> {
  if (typeof workflowId !== 'string') return {};
  const [kind, id] = workflowId.split('-');
  if (!id) return {};
  if (kind === 'prediction' || kind === 'webhook') return { predictionId: id };
  if (kind === 'batch') return { batchId: id };
  return {};
}

export function predictionIdOf(workflowId: unknown): string | undefined {
  const subject = subjectOf(workflowId);
  return 'predictionId' in subject ? subject.predictionId : undefined;
}

const LEVELS: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

export function temporalLogger(logger: Logger): TemporalLogger {
  const log = (level: LogLevel, message: string, meta?: LogMetadata) => {
    logger[LEVELS[level]]({ ...meta, ...subjectOf(meta?.workflowId) }, message);
  };
  return {
    log,
    trace: (m, meta) => log('TRACE', m, meta),
    debug: (m, meta) => log('DEBUG', m, meta),
    info: (m, meta) => log('INFO', m, meta),
    warn: (m, meta) => log('WARN', m, meta),
    error: (m, meta) => log('ERROR', m, meta),
  };
}
