import { z } from 'zod';
import { ValidationError } from '../../api/errors';
import { preferWaitSeconds } from '../../api/prediction-request';
import { decodeCursor, encodeCursor } from '../../db/paging';
import { withoutNul } from '../../db/sanitize';
import { removeBackgroundInput } from '../../domain/tasks/remove-background';
import { textGenerationInput } from '../../domain/tasks/text-generation';
import { parseConfig } from '../../lib/config';
import { type FetchInputDeps, fetchInput } from '../../lib/fetch-input';
import { idFromKey, newId } from '../../lib/ids';

describe('text-generation input', () => {
  test('fills defaults', () => {
    expect(textGenerationInput.parse({ prompt: 'hi' })).toEqual({
      prompt: 'hi',
      max_tokens: 128,
      min_tokens: 0,
      temperature: 0.7,
      top_p: 0.95,
      top_k: 0,
    });
  });

  test.each([
    [{}, 'prompt'],
    [{ prompt: '' }, 'prompt'],
    [{ prompt: 'x', max_tokens: 'many' }, 'max_tokens'],
    [{ prompt: 'x', max_tokens: 1.5 }, 'max_tokens'],
    [{ prompt: 'x', temperature: -1 }, 'temperature'],
    [{ prompt: 'x', top_p: 0 }, 'top_p'],
    [{ prompt: 'x', min_tokens: 10, max_tokens: 5 }, 'min_tokens'],
    [{ prompt: 'x', stop: [''] }, 'stop'],
  ])('%j is refused at %s', (input, field) => {
    const result = textGenerationInput.safeParse(input);
    expect(result.success).toBe(false);
    expect(result.error!.issues[0].path[0]).toBe(field);
  });

  test('unknown fields are named', () => {
    const result = textGenerationInput.safeParse({ prompt: 'x', promtp: 'y' });
    const err = ValidationError.fromZod(result.error!, 'input');
    expect(err.fields).toEqual([{ field: 'input.promtp', description: 'is not a known field' }]);
    expect(err.status).toBe(422);
  });
});

describe('remove-background input', () => {
  test.each([
    'https://example.com/cat.png',
    'http://127.0.0.1:9000/b/cat.jpg',
    'data:image/png;base64,iVBORw0KGgo=',
    'data:image/svg+xml;charset=utf-8;base64,PHN2Zy8+',
  ])('%s is an image', (image) => expect(removeBackgroundInput.safeParse({ image }).success).toBe(true));

  test.each(['', 'cat.png', 'ftp://example.com/cat.png', 'data:text/plain;base64,aGk=', 'data:image/png,raw', 'data:image/png;base64,#!'])(
    '%j is refused',
    (image) => expect(removeBackgroundInput.safeParse({ image }).success).toBe(false),
  );

  test('unknown fields are refused', () => {
    expect(removeBackgroundInput.safeParse({ image: 'https://example.com/a.png', format: 'webp' }).success).toBe(false);
  });

  test('a data URI carries its bytes, within the size limit', async () => {
    // The data URI path reads nothing from storage or the network.
    const deps = { storage: undefined, signer: undefined, allowPrivate: false, maxBytes: 8, timeoutMs: 1000 } as unknown as FetchInputDeps;
    await expect(fetchInput('data:image/png;base64,aGVsbG8=', deps)).resolves.toEqual({
      bytes: Buffer.from('hello'),
      contentType: 'image/png',
    });
    await expect(fetchInput(`data:image/png;base64,${Buffer.from('more than eight').toString('base64')}`, deps)).rejects.toThrow(/limit 8/);
  });
});

describe('ValidationError', () => {
  test('names nested fields with a prefix', () => {
    const schema = z.object({ a: z.object({ b: z.number() }) });
    const err = ValidationError.fromZod(schema.safeParse({ a: { b: 'x' } }).error!, 'input');
    expect(err.fields[0].field).toBe('input.a.b');
    expect(err.message).toMatch(/^input\.a\.b: /);
  });
});

describe('Prefer: wait', () => {
  test.each([
    [undefined, 0],
    ['', 0],
    ['wait', 60],
    ['wait=5', 5],
    ['wait=600', 60],
    ['respond-async, wait=10', 10],
    ['return=minimal', 0],
    ['waiting', 0],
  ])('%s → %d s', (header, seconds) => {
    expect(preferWaitSeconds(header)).toBe(seconds);
  });
});

describe('ids and cursors', () => {
  test('ids look like Replicate ids', () => {
    const ids = new Set(Array.from({ length: 100 }, newId));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^[a-z2-7]{26}$/);
  });

  test('an idempotency key gives the same id for the same account only', () => {
    expect(idFromKey('acc_1', 'k')).toBe(idFromKey('acc_1', 'k'));
    expect(idFromKey('acc_2', 'k')).not.toBe(idFromKey('acc_1', 'k'));
    expect(idFromKey('acc_1', 'k')).toMatch(/^[a-z2-7]{26}$/);
  });

  test('cursors round-trip and junk is refused', () => {
    const c = { createdAt: '2026-01-01T00:00:00.000Z', id: 'abc' };
    expect(decodeCursor(encodeCursor(c))).toEqual(c);
    expect(decodeCursor('not-a-cursor')).toBeUndefined();
    expect(decodeCursor(Buffer.from('["nope",1]').toString('base64url'))).toBeUndefined();
  });
});

describe('config', () => {
  const base = { S3_ACCESS_KEY_ID: 'a', S3_SECRET_ACCESS_KEY: 'b', KILN_URL_SIGNING_KEY: 'x'.repeat(32) };
  test('defaults are the local stack', () => {
    const c = parseConfig(base);
    expect(c.PORT).toBe(8080);
    expect(c.TEMPORAL_ADDRESS).toBe('127.0.0.1:7233');
    expect(c.KILN_ENGINE_THREADS).toBeGreaterThanOrEqual(1);
  });
  test('a bad value fails fast, naming the variable', () => {
    expect(() => parseConfig({ ...base, PORT: 'eighty' })).toThrow(/PORT/);
    expect(() => parseConfig({ ...base, S3_SECRET_ACCESS_KEY: undefined })).toThrow(/S3_SECRET_ACCESS_KEY/);
    expect(() => parseConfig({ ...base, KILN_WEBHOOK_RETRY_SCHEDULE: '5 s, soon' })).toThrow(/KILN_WEBHOOK_RETRY_SCHEDULE/);
  });
  test('models under other licenses are seeded only when named', () => {
    expect(parseConfig(base).KILN_OPTIONAL_MODELS).toEqual([]);
    expect(parseConfig({ ...base, KILN_OPTIONAL_MODELS: ' remove-background, ' }).KILN_OPTIONAL_MODELS).toEqual(['remove-background']);
    expect(() => parseConfig({ ...base, KILN_OPTIONAL_MODELS: 'remove-background,gpt-5' })).toThrow(/KILN_OPTIONAL_MODELS/);
  });
});

describe('withoutNul', () => {
  test('replaces NUL in nested strings and keys, leaves the rest alone', () => {
    expect(withoutNul({ out: ['a\u0000b', 'c'], n: 1, d: null, ['k\u0000']: true })).toEqual({
      out: ['a\uFFFDb', 'c'],
      n: 1,
      d: null,
      ['k\uFFFD']: true,
    });
    expect(withoutNul('plain')).toBe('plain');
  });
});
