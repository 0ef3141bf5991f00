import type { RequestHandler, Response } from 'express';
import { accountForToken, touchApiToken, type Account } from '../db/accounts';
import type { Db } from '../db/client';
import { UnauthorizedError } from './errors';

/** `Authorization: Bearer <token>` (or Replicate's older `Token <token>`). */
export function requireAuth(db: Db): RequestHandler {
  return async (req, res, next) => {
    const match = /^(?:Bearer|Token)\s+(\S+)$/i.exec(req.get('authorization') ?? '');
    if (!match) throw new UnauthorizedError('Authentication required: pass Authorization: Bearer <token>');
    const account = await accountForToken(db, match[1]);
    if (!account || account.disabled) throw new UnauthorizedError();
    res.locals.account = account;
    void touchApiToken(db, match[1]).catch(() => undefined);
    next();
  };
}

export function currentAccount(res: Response): Account {
  return res.locals.account as Account;
}
