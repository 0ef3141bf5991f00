/**
 * While a prediction is starting, shows its model's warm-up: a progress bar for the download,
 * then a line for the load, from `GET /v1/predictions/{id}/setup`. Warm models show nothing.
 */
import { request, type ApiContext } from './client';
import { byteBar } from './progress-bar';

interface Setup {
  phase: 'queued' | 'download' | 'load' | null;
  file?: string;
  bytes?: number;
  total?: number;
}

export function showWarmUp(ctx: ApiContext, id: string, quiet: boolean): { stop: () => Promise<void> } {
  let stopped = false;
  let bar: ReturnType<typeof byteBar> | undefined;
  let file: string | undefined;
  let announcedLoad = false;
  const loop = (async () => {
    while (!stopped) {
      let s: Setup;
      try {
        s = await request<Setup>(ctx, `/v1/predictions/${id}/setup`);
      } catch {
        return; // progress is a nicety: never fail the run for it
      }
      if (s.phase === null) return;
      if (s.phase === 'download' && s.total) {
        if (file !== s.file) {
          bar?.stop();
          bar = byteBar('download', s.total, quiet);
          file = s.file;
        }
        bar?.update(s.bytes ?? 0);
      }
      if (s.phase === 'load' && !announcedLoad) {
        bar?.stop();
        bar = undefined;
        announcedLoad = true;
        if (!quiet) process.stderr.write('loading the model…\n');
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      bar?.stop();
    },
  };
}
