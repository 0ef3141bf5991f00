/** The CLI's byte progress bars (push, pull, warm-up), on stderr so stdout stays the command's output. */
import { Presets, SingleBar } from 'cli-progress';

export function byteBar(label: string, total: number, quiet: boolean) {
  const b = new SingleBar(
    {
      format: `${label.padEnd(9)} {bar} {percentage}% | {value_mb}/{total_mb} MB | {speed} MB/s`,
      hideCursor: true,
      noTTYOutput: !quiet,
      notTTYSchedule: 2000,
    },
    Presets.shades_classic,
  );
  const started = Date.now();
  const mb = (n: number) => (n / 2 ** 20).toFixed(1);
  if (!quiet) b.start(total, 0, { value_mb: '0.0', total_mb: mb(total), speed: '0' });
  return {
    update: (n: number) =>
      !quiet && b.update(n, { value_mb: mb(n), speed: (n / 2 ** 20 / Math.max(0.001, (Date.now() - started) / 1000)).toFixed(0) }),
    stop: () => !quiet && b.stop(),
  };
}
