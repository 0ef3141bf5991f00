import pino from 'pino';

/**
 * Structured JSON logs. Anything that could carry a secret is redacted at the source,
 * so a stray `log.info({ req })` cannot leak a token.
 */
export function createLogger(name: string, level = process.env.LOG_LEVEL ?? 'info') {
  return pino({
    name,
    level,
    redact: {
      paths: ['authorization', 'req.headers.authorization', '*.authorization', 'token', '*.token', 'secret', '*.secret'],
      censor: '[redacted]',
    },
  });
}

export type Logger = ReturnType<typeof createLogger>;
