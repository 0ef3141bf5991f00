/** The per-account caps on open connections, and their withdrawal when a token or account no longer holds. */
import { EventEmitter } from 'node:events';
import type { Response } from 'express';
import { TooManyRequestsError } from '../../api/errors';
import { AccessWithdrawnError, OpenConnections } from '../../api/open-connections';
import { stillInForce } from '../../db/accounts';
import { createLogger } from '../../lib/logger';
import { poll } from '../helpers';

jest.mock('../../db/accounts', () => ({ stillInForce: jest.fn() }));

const limits = { maxOpenStreams: 2, maxWaitingRequests: 1, recheckMs: 100 };
const account = (id: string, own: { maxOpenStreams?: number; maxWaitingRequests?: number } = {}) => ({
  id,
  maxOpenStreams: own.maxOpenStreams ?? null,
  maxWaitingRequests: own.maxWaitingRequests ?? null,
});
const response = () => new EventEmitter() as unknown as Response;

let connections: OpenConnections;
beforeEach(() => {
  jest.mocked(stillInForce).mockReset();
  connections = new OpenConnections({} as never, limits, createLogger('test', 'silent'));
});
afterEach(() => connections.stop());

test('an account holds up to its cap of each kind; one more is a 429 naming the cap; a closed one makes room', () => {
  const a = account('a');
  const first = response();
  connections.hold('stream', a, first);
  connections.hold('stream', a, response());
  expect(() => connections.hold('stream', a, response())).toThrow(TooManyRequestsError);
  expect(() => connections.hold('stream', a, response())).toThrow(/max_open_streams/);
  // The kinds and the accounts count apart.
  connections.hold('wait', a, response());
  expect(() => connections.hold('wait', a, response())).toThrow(/max_waiting_requests/);
  connections.hold('stream', account('b'), response());

  first.emit('close');
  first.emit('close');
  expect(connections.count('stream', 'a')).toBe(1);
  connections.hold('stream', a, response());
  expect(() => connections.hold('stream', a, response())).toThrow(TooManyRequestsError);
});

test("an account's own cap overrides the default", () => {
  const roomy = account('r', { maxOpenStreams: 3 });
  for (let i = 0; i < 3; i++) connections.hold('stream', roomy, response());
  expect(() => connections.hold('stream', roomy, response())).toThrow(/3 at once/);
});

test('a revoked token or a disabled account ends what it holds, and nothing else', async () => {
  jest.mocked(stillInForce).mockResolvedValue({ tokens: new Set(['kept']), accounts: new Set(['a']) });
  const revoked = connections.hold('stream', account('a'), response(), 'gone');
  const kept = connections.hold('wait', account('a'), response(), 'kept');
  const signed = connections.hold('stream', account('a'), response());
  const disabled = connections.hold('stream', account('d'), response());
  await poll(
    async () => revoked.signal.aborted && disabled.signal.aborted,
    (ended) => ended,
    { timeoutMs: 5_000 },
  );
  expect(revoked.signal.reason).toEqual(new AccessWithdrawnError('token revoked'));
  expect(() => revoked.throwIfWithdrawn()).toThrow(/revoked/);
  expect((disabled.signal.reason as AccessWithdrawnError).reason).toBe('account disabled');
  expect(kept.signal.aborted).toBe(false);
  expect(signed.signal.aborted).toBe(false);
  // One look covers every connection held: each token and account once.
  const [tokens, accounts] = jest.mocked(stillInForce).mock.calls[0].slice(1) as [string[], string[]];
  expect(tokens.sort()).toEqual(['gone', 'kept']);
  expect(accounts.sort()).toEqual(['a', 'd']);
});
