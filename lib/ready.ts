import { writeFileSync } from 'node:fs';

/**
 * Tells the script that started this process that it is serving: the script sets
 * KILN_READY_FILE and waits for the file, whatever the log level.
 */
export function announceReady(): void {
  const file = process.env.KILN_READY_FILE;
  if (file) writeFileSync(file, `${process.pid}\n`);
}
