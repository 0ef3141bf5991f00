/** `kiln retry <batch id>`: a batch's failed and unfinished items run again (POST /v1/batches/{id}/retry). */
import { type ApiContext, request } from './client';

// biome-ignore lint/suspicious/noExplicitAny: API JSON, shown as it comes
type Json = Record<string, any>;

const ENDED = ['succeeded', 'failed', 'canceled'];

function printBatch(b: Json): void {
  console.log(
    `batch ${b.id} ${b.status} (attempt ${b.attempt}${b.run_id ? `, run ${b.run_id}` : ''}): ${b.completed} of ${b.total} done, ${b.failed} failed`,
  );
  if (b.error) console.log(`error: ${b.error}`);
  if (b.output_file?.urls?.get) console.log(`output: ${b.output_file.urls.get}`);
}

export async function retryBatch(
  ctx: ApiContext,
  id: string,
  o: { wait?: boolean; out: (value: unknown, human: () => void) => void },
): Promise<void> {
  let b = await request<Json>(ctx, `/v1/batches/${id}/retry`, { method: 'POST', json: {} });
  if (o.wait) {
    while (!ENDED.includes(b.status)) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      b = await request<Json>(ctx, `/v1/batches/${id}`);
    }
    if (b.status !== 'succeeded' || b.failed > 0) process.exitCode = 1;
  }
  o.out(b, () => printBatch(b));
}
