/**
 * What the API checks before it starts anything: the account's rate limit for the task type
 * (counted in Postgres, so it holds across API processes) and its caps on queued and, when the
 * account refuses work over its cap, admitted predictions.
 */
import type { Response } from 'express';
import type { Account } from '../db/accounts';
import { heldAdmissions } from '../db/admissions';
import type { Db } from '../db/client';
import { hitRateLimit, pruneRateLimits, type RateLimitResult } from '../db/rate-limits';
import { rateLimitFor } from '../domain/tasks';
import { TooManyRequestsError } from './errors';

export function rateLimitHeaders(r: RateLimitResult): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(r.limit),
    'X-RateLimit-Remaining': String(r.remaining),
    'X-RateLimit-Reset': String(Math.ceil(r.resetAt.getTime() / 1000)),
  };
}

export function setRateLimitHeaders(res: Response, r: RateLimitResult | undefined): void {
  if (r) res.set(rateLimitHeaders(r));
}

let lastPrune = 0;

/**
 * Counts one request in the account's one-minute window for `scope` (the same counters as its
 * prediction rate limits); over `limit`, a 429 naming the limit, e.g. "5 webhook secret rotations".
 */
export async function checkRequestRate(db: Db, accountId: string, scope: string, limit: number, what: string): Promise<RateLimitResult> {
  const { queued: _queued, ...rate } = await hitRateLimit(db, accountId, scope, limit);
  if (!rate.allowed) {
    throw new TooManyRequestsError(
      `Rate limit of ${limit} ${what} per minute reached; try again after ${rate.resetAt.toISOString()}`,
      (rate.resetAt.getTime() - Date.now()) / 1000,
      rateLimitHeaders(rate),
    );
  }
  return rate;
}

export async function checkLimits(db: Db, account: Account, task: string): Promise<RateLimitResult> {
  const limit = rateLimitFor(task, account.rateLimits);
  const { queued, ...rate } = await hitRateLimit(db, account.id, `predictions:${task}`, limit);
  if (Date.now() - lastPrune > 60_000) {
    lastPrune = Date.now();
    void pruneRateLimits(db).catch(() => undefined);
  }
  if (!rate.allowed) {
    throw new TooManyRequestsError(
      `Rate limit of ${limit} ${task} predictions per minute reached; try again after ${rate.resetAt.toISOString()}`,
      (rate.resetAt.getTime() - Date.now()) / 1000,
      rateLimitHeaders(rate),
    );
  }
  if (queued >= account.maxQueued) {
    throw new TooManyRequestsError(
      `${queued} predictions are queued for this account (max_queued ${account.maxQueued}); wait for some to start`,
      5,
      rateLimitHeaders(rate),
    );
  }
  if (account.overCap === 'refuse') {
    const held = await heldAdmissions(db, account.id);
    if (held >= account.maxRunning) {
      throw new TooManyRequestsError(
        `${held} predictions are running or queued at the engines for this account (max_running ${account.maxRunning})`,
        2,
        rateLimitHeaders(rate),
      );
    }
  }
  return rate;
}
