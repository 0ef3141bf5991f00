/**
 * While a prediction is starting, shows its model's warm-up: a progress bar for the download,
 * then a line for the load, from `GET /v1/predictions/{id}/setup`; while it waits in the queue,
 * a line each time its place changes, from the prediction's `queue`. Warm, idle models show nothing.
 */
import { type ApiContext, request } from './client';
import { byteBar } from './progress-bar';

interface QueuePlace {
  position: number;
  eta_seconds: number | null;
}

/** What `kiln run` prints while it waits, e.g. "queued: position 3, about 4 s". */
export function queueLine(q: QueuePlace): string {
  return `queued: position ${q.position}${q.eta_seconds !== null ? `, about ${Math.ceil(q.eta_seconds)} s` : ''}\n`;
}

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
  let lastPosition: number | undefined;
  const loop = (async () => {
    while (!stopped) {
      let s: Setup;
      try {
        s = await request<Setup>(ctx, `/v1/predictions/${id}/setup`);
      } catch {
        return; // progress is a nicety: never fail the run for it
      }
      if (s.phase === null) return;
      if (s.phase === 'queued' && !quiet) {
        const queue = await request<{ queue?: QueuePlace }>(ctx, `/v1/predictions/${id}`).then(
          (p) => p.queue,
          () => undefined,
        );
        if (queue && queue.position !== lastPosition && queue.position > 1) process.stderr.write(queueLine(queue));
        if (queue) lastPosition = queue.position;
      }
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
