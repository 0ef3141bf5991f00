import { describe, expect, it } from '@jest/globals';
import { SharedReads } from '../../lib/shared-reads';

/** A read that ends when told to, counting how often it was started. */
function controlledRead<T>() {
  let started = 0;
  let settle: { resolve: (v: T) => void; reject: (e: Error) => void } | undefined;
  const read = () => {
    started += 1;
    return new Promise<T>((resolve, reject) => (settle = { resolve, reject }));
  };
  return { read, started: () => started, settle: () => settle! };
}

describe('SharedReads', () => {
  it('folds reads of one key that run at the same time into one', async () => {
    const reads = new SharedReads();
    const r = controlledRead<number>();
    const a = reads.share('k', r.read);
    const b = reads.share('k', r.read);
    expect(r.started()).toBe(1);
    r.settle().resolve(7);
    await expect(Promise.all([a, b])).resolves.toEqual([7, 7]);
  });

  it('keeps nothing once a read settles: the next caller reads again', async () => {
    const reads = new SharedReads();
    const r = controlledRead<number>();
    const first = reads.share('k', r.read);
    r.settle().resolve(1);
    await first;
    expect(reads.size).toBe(0);
    const second = reads.share('k', r.read);
    expect(r.started()).toBe(2);
    r.settle().resolve(2);
    await expect(second).resolves.toBe(2);
  });

  it('gives a failure to every caller of that read, and forgets it', async () => {
    const reads = new SharedReads();
    const r = controlledRead<number>();
    const a = reads.share('k', r.read);
    const b = reads.share('k', r.read);
    r.settle().reject(new Error('postgres restarting'));
    await expect(a).rejects.toThrow('postgres restarting');
    await expect(b).rejects.toThrow('postgres restarting');
    expect(reads.size).toBe(0);
  });

  it('reads different keys apart', async () => {
    const reads = new SharedReads();
    const r = controlledRead<string>();
    void reads.share('a', r.read);
    void reads.share('b', r.read);
    expect(r.started()).toBe(2);
  });
});
