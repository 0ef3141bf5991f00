/**
 * `Prefer: wait[=N]`: the create's answer is held until its prediction finishes or N seconds
 * pass. A held request is one of the account's waiting requests (KILN_MAX_WAITING_REQUESTS), taken
 * before the prediction starts so that a refused one starts nothing, and it ends with a 401 once
 * its token is revoked or its account disabled.
 */
import type { Request, Response } from 'express';
import type { Db } from '../db/client';
import type { PredictionRow } from '../db/predictions';
import { currentAccount, currentTokenHash } from './auth';
import { awaitPrediction } from './await-prediction';
import type { EventHub } from './event-hub';
import type { OpenConnection, OpenConnections } from './open-connections';
import { preferWaitSeconds } from './prediction-request';

/** The request's hold on a waiting request, if it asks to wait (a 429 past the account's cap). */
export function holdPreferWait(connections: OpenConnections, req: Request, res: Response): OpenConnection | undefined {
  if (preferWaitSeconds(req.get('prefer')) === 0) return undefined;
  return connections.hold('wait', currentAccount(res), res, currentTokenHash(res));
}

/** The prediction when it finishes or the wait runs out; a 401 if the hold was withdrawn meanwhile. `readAt`: see awaitPrediction. */
export async function waitAsAsked(
  deps: { db: Db; hub: EventHub },
  req: Request,
  row: PredictionRow,
  wait: OpenConnection | undefined,
  readAt?: number,
): Promise<PredictionRow> {
  const seconds = preferWaitSeconds(req.get('prefer'));
  if (seconds === 0 || !wait) return row;
  const final = await awaitPrediction(deps, row, { timeoutMs: seconds * 1000, readAt, signal: wait.signal });
  wait.throwIfWithdrawn();
  return final;
}
