import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import { LRUCache } from 'lru-cache';
import { type Account, accountForToken, touchApiToken } from '../db/accounts';
import type { Db } from '../db/client';
import { sha256Hex } from '../lib/ids';
import { ApiError, NotFoundError, UnauthorizedError } from './errors';

// last_used_at is kept to the minute: a token this process marked used within the minute
// needs no write (not even one that changes nothing) on every request.
const touched = new LRUCache<string, true>({ max: 10_000, ttl: 60_000 });

/** The token of `Authorization: Bearer <token>` (or Replicate's older `Token <token>`). */
export function bearerToken(req: Request): string | undefined {
  return /^(?:Bearer|Token)\s+(\S+)$/i.exec(req.get('authorization') ?? '')?.[1];
}

/** The account of the request's token, if it has a valid one. */
export async function optionalAccount(db: Db, req: Request): Promise<Account | undefined> {
  const token = bearerToken(req);
  const account = token ? await accountForToken(db, token) : undefined;
  return account && !account.disabled ? account : undefined;
}

export function requireAuth(db: Db): RequestHandler {
  return async (req, res, next) => {
    const token = bearerToken(req);
    if (!token) throw new UnauthorizedError('Authentication required: pass Authorization: Bearer <token>');
    const account = await optionalAccount(db, req);
    if (!account) throw new UnauthorizedError();
    res.locals.account = account;
    res.locals.tokenHash = sha256Hex(token);
    if (!touched.has(token)) {
      touched.set(token, true);
      void touchApiToken(db, token).catch(() => undefined);
    }
    next();
  };
}

export function currentAccount(res: Response): Account {
  return res.locals.account as Account;
}

/** The sha256 of the request's token (as stored): what open connections check for revocation. */
export function currentTokenHash(res: Response): string {
  return res.locals.tokenHash as string;
}

/**
 * A route for the operator's tools (a Prometheus scraper), not for tenants: it takes the one
 * token named by `setting` from the environment, compared in constant time. Unset, the route is off.
 */
export function requireOperatorToken(expected: string | undefined, setting: string): RequestHandler {
  const digest = (s: string) => createHash('sha256').update(s).digest();
  const want = expected ? digest(expected) : undefined;
  return (req, _res, next) => {
    if (!want)
      throw new NotFoundError(`${req.path} is not served here: set ${setting} to serve it to a client that sends it as a bearer token`);
    const given = bearerToken(req);
    if (!given || !timingSafeEqual(digest(given), want)) {
      throw new ApiError(
        401,
        'Unauthenticated',
        `${req.path} needs the operator's token: Authorization: Bearer <${setting}>`,
        {},
        { 'WWW-Authenticate': 'Bearer' },
      );
    }
    next();
  };
}
