/** The Temporal CLI, as an operator runs it, against the suite's server and namespace. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

export async function temporalCli(...args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(
    process.env.TEMPORAL_BIN ?? 'temporal',
    [...args, '--address', process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233', '--namespace', process.env.TEMPORAL_NAMESPACE ?? 'kiln-test'],
    { maxBuffer: 16 * 2 ** 20 },
  );
  return stdout;
}
