/**
 * The connections an API process holds open for an account: SSE streams, and requests held for
 * their prediction's end (`Prefer: wait`, OpenAI calls without `stream`). Each kind has a cap per
 * account, answered with a 429 that names it; and each connection ends once the token it was
 * opened with is revoked or its account disabled. One look at the database every
 * KILN_OPEN_CONNECTION_RECHECK_MS checks the tokens and accounts of all of them, whatever their number.
 *
 * The caps count what this process holds: behind a balancer over N API processes an account may
 * hold up to N times as many.
 */
import type { Response } from 'express';
import { type Account, stillInForce } from '../db/accounts';
import type { Db } from '../db/client';
import type { Logger } from '../lib/logger';
import { TooManyRequestsError, UnauthorizedError } from './errors';

export type ConnectionKind = 'stream' | 'wait';

export interface ConnectionLimits {
  /** KILN_MAX_OPEN_STREAMS: an account's cap where its row names none. */
  maxOpenStreams: number;
  /** KILN_MAX_WAITING_REQUESTS, likewise. */
  maxWaitingRequests: number;
  /** KILN_OPEN_CONNECTION_RECHECK_MS. */
  recheckMs: number;
}

export type CappedAccount = Pick<Account, 'id' | 'maxOpenStreams' | 'maxWaitingRequests'>;

/** A connection ended because the token it was opened with, or its account, no longer holds. */
export class AccessWithdrawnError extends UnauthorizedError {
  constructor(readonly reason: 'token revoked' | 'account disabled') {
    super(
      reason === 'token revoked'
        ? 'The token this connection was opened with has been revoked'
        : 'The account this connection belongs to has been disabled',
    );
  }
}

export interface OpenConnection {
  /** Aborted, with an AccessWithdrawnError as its reason, when the token or the account no longer holds. */
  readonly signal: AbortSignal;
  /** Throws the AccessWithdrawnError if the connection was withdrawn. */
  throwIfWithdrawn(): void;
}

interface Held {
  kind: ConnectionKind;
  accountId: string;
  tokenHash?: string;
  abort: AbortController;
}

/** The name of each kind's cap, as the account's limits and the 429 call it. */
const capNames: Record<ConnectionKind, { field: string; setting: string; what: string }> = {
  stream: { field: 'max_open_streams', setting: 'KILN_MAX_OPEN_STREAMS', what: 'open streams' },
  wait: {
    field: 'max_waiting_requests',
    setting: 'KILN_MAX_WAITING_REQUESTS',
    what: 'requests waiting for their prediction (Prefer: wait, OpenAI without stream)',
  },
};

export class OpenConnections {
  private held = new Set<Held>();
  private counts = new Map<string, Record<ConnectionKind, number>>();
  private timer?: NodeJS.Timeout;
  private checking = false;

  constructor(
    private db: Db,
    private limits: ConnectionLimits,
    private logger: Logger,
  ) {}

  /** The account's cap for `kind`: its own where it has one, else the configured default. */
  capOf(kind: ConnectionKind, account: CappedAccount): number {
    return kind === 'stream'
      ? (account.maxOpenStreams ?? this.limits.maxOpenStreams)
      : (account.maxWaitingRequests ?? this.limits.maxWaitingRequests);
  }

  /**
   * Holds a connection of `kind` for the account until the response closes; a 429 naming the cap
   * where the account holds its cap already. `tokenHash`: the token it was opened with (a signed
   * URL has none: it answers to the account's state only).
   */
  hold(kind: ConnectionKind, account: CappedAccount, res: Response, tokenHash?: string): OpenConnection {
    const counts = this.counts.get(account.id) ?? { stream: 0, wait: 0 };
    const cap = this.capOf(kind, account);
    if (counts[kind] >= cap) {
      const name = capNames[kind];
      throw new TooManyRequestsError(
        `Too many ${name.what}: this account may hold ${cap} at once on this server (${name.field}); close one and try again`,
        5,
      );
    }
    counts[kind] += 1;
    this.counts.set(account.id, counts);
    const held: Held = { kind, accountId: account.id, tokenHash, abort: new AbortController() };
    this.held.add(held);
    if (!this.timer) {
      this.timer = setInterval(() => void this.recheck(), this.limits.recheckMs);
      this.timer.unref();
    }
    res.on('close', () => this.release(held));
    return {
      signal: held.abort.signal,
      throwIfWithdrawn: () => {
        if (held.abort.signal.aborted) throw held.abort.signal.reason as AccessWithdrawnError;
      },
    };
  }

  /** How many connections of `kind` the account holds here. */
  count(kind: ConnectionKind, accountId: string): number {
    return this.counts.get(accountId)?.[kind] ?? 0;
  }

  private release(held: Held): void {
    if (!this.held.delete(held)) return;
    const counts = this.counts.get(held.accountId);
    if (counts) {
      counts[held.kind] -= 1;
      if (counts.stream === 0 && counts.wait === 0) this.counts.delete(held.accountId);
    }
    if (this.held.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** One look for every connection held: those whose token or account no longer holds are ended. */
  private async recheck(): Promise<void> {
    if (this.checking || this.held.size === 0) return;
    this.checking = true;
    try {
      const held = [...this.held];
      const tokens = [...new Set(held.flatMap((h) => (h.tokenHash ? [h.tokenHash] : [])))];
      const accounts = [...new Set(held.map((h) => h.accountId))];
      const live = await stillInForce(this.db, tokens, accounts);
      for (const h of held) {
        if (h.abort.signal.aborted) continue;
        if (!live.accounts.has(h.accountId)) h.abort.abort(new AccessWithdrawnError('account disabled'));
        else if (h.tokenHash && !live.tokens.has(h.tokenHash)) h.abort.abort(new AccessWithdrawnError('token revoked'));
      }
    } catch (err) {
      this.logger.warn({ err }, 'could not check the tokens and accounts of open connections; trying again');
    } finally {
      this.checking = false;
    }
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
