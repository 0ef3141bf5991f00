/**
 * What one account may not do to another's things, through the HTTP API: read its webhook
 * delivery log, redeliver its webhooks, revoke its tokens, or call (or learn of) its private
 * models over the OpenAI-compatible API. Each refusal is a 404 that says no more than a name
 * that does not exist, never a 403 that confirms it does.
 */
import { closeDb, type Db } from '../../db/client';
import { llamaVersion } from '../fixtures/llama-versions';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { type Receiver, startReceiver } from '../receiver';

jest.setTimeout(120_000);

let db: Db;
let owner: Awaited<ReturnType<typeof newAccount>>;
let stranger: Awaited<ReturnType<typeof newAccount>>;
const receivers: Receiver[] = [];

beforeAll(async () => {
  db = testDb();
  owner = await newAccount(db, 'xa-owner');
  stranger = await newAccount(db, 'xa-stranger');
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await closeDb(db);
});

describe('webhooks of another account', () => {
  let rx: Receiver;
  let id: string;

  beforeAll(async () => {
    rx = await startReceiver();
    receivers.push(rx);
    const created = await api('/v1/models/kiln/tiny-llama/predictions', {
      token: owner.token,
      body: { input: { prompt: 'mine', max_tokens: 2 }, webhook: rx.url, webhook_events_filter: ['completed'] },
    });
    expect(created.status).toBe(201);
    id = created.body.id;
    await poll(
      () => api(`/v1/predictions/${id}`, { token: owner.token }),
      (r) => TERMINAL.includes(r.body.status),
      { timeoutMs: 60_000 },
    );
    await poll(
      async () => rx.accepted,
      (a) => a.length === 1,
    );
  });

  test('the delivery log is 404 to another account, as for a prediction that does not exist', async () => {
    const mine = await api(`/v1/predictions/${id}/webhooks`, { token: owner.token });
    expect(mine.status).toBe(200);
    expect(mine.body.results).toHaveLength(1);
    const theirs = await api(`/v1/predictions/${id}/webhooks`, { token: stranger.token });
    expect(theirs.status).toBe(404);
    expect(JSON.stringify(theirs.body)).not.toContain(rx.url);
    const otherId = id.replace(/.$/, (c) => (c === 'a' ? 'b' : 'a'));
    const missing = await api(`/v1/predictions/${otherId}/webhooks`, { token: stranger.token });
    expect(missing.status).toBe(404);
    expect(theirs.body).toEqual({ ...missing.body, detail: missing.body.detail.replace(otherId, id) });
  });

  test('redelivery by another account is 404 and sends nothing; the owner can', async () => {
    const theirs = await api(`/v1/predictions/${id}/webhooks/redeliver`, { token: stranger.token, method: 'POST' });
    expect(theirs.status).toBe(404);
    const mine = await api(`/v1/predictions/${id}/webhooks/redeliver`, { token: owner.token, method: 'POST' });
    expect(mine.status).toBe(202);
    // The owner's redelivery arrives; had the stranger's started one, it would have come first.
    await poll(
      async () => rx.accepted,
      (a) => a.length >= 2,
    );
    const log = await poll(
      () => api(`/v1/predictions/${id}/webhooks`, { token: owner.token }),
      (r) => r.body.results.length >= 2,
    );
    expect(log.body.results).toHaveLength(2);
    expect(rx.received).toHaveLength(2);
  });
});

describe('tokens', () => {
  test('another account cannot revoke a token; its owner can, and it gets 401 on the very next call', async () => {
    const second = await api('/v1/account/tokens', { token: owner.token, body: { name: 'revoke-me' } });
    expect(second.status).toBe(201);
    const { id, token } = second.body as { id: string; token: string };
    expect((await api('/v1/account', { token })).status).toBe(200);

    const byStranger = await api(`/v1/account/tokens/${id}`, { token: stranger.token, method: 'DELETE' });
    expect(byStranger.status).toBe(404);
    expect((await api('/v1/account', { token })).status).toBe(200);
    const listed = await api('/v1/account/tokens', { token: owner.token });
    expect(listed.body.results.find((t: { id: string }) => t.id === id).revoked_at).toBeNull();

    // Used on every kind of route first, so nothing may answer from what it saw a moment ago.
    expect((await api('/v1/predictions', { token })).status).toBe(200);
    expect((await api('/openai/v1/models', { token })).status).toBe(200);
    const revoked = await api(`/v1/account/tokens/${id}`, { token: owner.token, method: 'DELETE' });
    expect(revoked.status).toBe(200);
    const after = await Promise.all([
      api('/v1/account', { token }),
      api('/v1/predictions', { token }),
      api('/v1/models/kiln/tiny-llama/predictions', { token, body: { input: { prompt: 'x', max_tokens: 1 } } }),
      api('/openai/v1/models', { token }),
      api('/openai/v1/chat/completions', {
        token,
        body: { model: 'kiln/tiny-llama', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 },
      }),
    ]);
    expect(after.map((r) => r.status)).toEqual([401, 401, 401, 401, 401]);
    expect((await api('/v1/account', { token: owner.token })).status).toBe(200);
  });
});

describe('private models over /openai/v1', () => {
  let ref: string;
  let versionId: string;

  beforeAll(async () => {
    const made = await llamaVersion(db, owner.account, { visibility: 'private' });
    ref = made.ref;
    versionId = made.version.id;
  });

  const chat = (token: string, model: string) =>
    api('/openai/v1/chat/completions', { token, body: { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 } });
  const completion = (token: string, model: string) =>
    api('/openai/v1/completions', { token, body: { model, prompt: 'hi', max_tokens: 2 } });

  test('the owner calls it', async () => {
    const r = await completion(owner.token, ref);
    expect(r.status).toBe(200);
    expect(r.body.choices).toHaveLength(1);
  });

  test('another account gets 404, word for word what a model that does not exist gets, and does not see it listed', async () => {
    const missing = `${owner.account.username}/no-such-model`;
    for (const call of [chat, completion]) {
      for (const [model, absent] of [
        [ref, missing],
        [`${ref}:${versionId}`, `${missing}:${versionId}`],
      ]) {
        const theirs = await call(stranger.token, model);
        const none = await call(stranger.token, absent);
        expect([theirs.status, none.status]).toEqual([404, 404]);
        expect(theirs.body.error).toEqual({ ...none.body.error, message: none.body.error.message.replace(absent, model) });
      }
    }
    const listed = await api('/openai/v1/models', { token: stranger.token });
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((m: { id: string }) => m.id)).not.toContain(ref);
    const ownList = await api('/openai/v1/models', { token: owner.token });
    expect(ownList.body.data.map((m: { id: string }) => m.id)).toContain(ref);
    // Nothing ran for the stranger.
    expect((await api('/v1/predictions', { token: stranger.token })).body.results).toEqual([]);
  });
});
