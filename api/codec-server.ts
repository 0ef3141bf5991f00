/**
 * Temporal's codec server protocol (`POST /decode`, `POST /encode`, proto3 JSON
 * `{ payloads: [{ metadata: { k: base64 }, data: base64 }] }`), served under /codec, so the
 * Temporal UI and `temporal workflow show --codec-endpoint` show payloads stored by reference
 * (lib/payload-refs.ts) as the JSON they stand for.
 *
 * Operators only: the decoded payloads are every account's inputs and outputs. The token is
 * KILN_OPERATOR_TOKEN, sent as `Authorization: Bearer …` (the CLI's `--codec-auth`) or, because
 * the UI sends headers only over HTTPS with its own login, as the path segment
 * `/codec/<token>/decode` (the request log never writes it). The UI calls from its own origin:
 * those in KILN_CODEC_CORS_ORIGINS get CORS answers, preflight included.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Payload, PayloadCodec } from '@temporalio/common';
import express, { type Request, type RequestHandler, Router } from 'express';
import { z } from 'zod';
import { bearerToken } from './auth';
import { ApiError, NotFoundError } from './errors';
import { parseOr422 } from './validation';

export interface CodecServerDeps {
  codec: PayloadCodec;
  /** KILN_OPERATOR_TOKEN; unset, the codec server is not served. */
  operatorToken?: string;
  /** Origins whose pages may call it (the Temporal UI's). */
  corsOrigins: string[];
}

const base64 = z.string().regex(/^[A-Za-z0-9+/_-]*={0,2}$/, 'must be base64');
const codecBody = z.object({
  payloads: z.array(z.object({ metadata: z.record(z.string(), base64).nullish(), data: base64.nullish() })).max(10_000),
});

const toPayload = (p: z.infer<typeof codecBody>['payloads'][number]): Payload => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  data: Buffer.from(p.data ?? '', 'base64'),
});
const toJson = (p: Payload) => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
});

export function codecServer(deps: CodecServerDeps): Router {
  const router = Router();
  const digest = (s: string) => createHash('sha256').update(s).digest();
  const want = deps.operatorToken ? digest(deps.operatorToken) : undefined;
  const origins = new Set(deps.corsOrigins);

  const cors: RequestHandler = (req, res, next) => {
    res.vary('Origin');
    const origin = req.get('origin');
    if (origin && origins.has(origin)) res.set({ 'Access-Control-Allow-Origin': origin, 'Access-Control-Allow-Credentials': 'true' });
    next();
  };

  const preflight: RequestHandler = (req, res) => {
    const origin = req.get('origin');
    if (!origin || !origins.has(origin)) {
      throw new ApiError(
        403,
        'Forbidden',
        `Origin: ${origin ?? '(none)'} may not call the codec server; add it to KILN_CODEC_CORS_ORIGINS`,
      );
    }
    res.set({
      'Access-Control-Allow-Methods': 'POST, OPTIONS',
      'Access-Control-Allow-Headers': 'Authorization, Content-Type, X-Namespace',
      'Access-Control-Max-Age': '600',
    });
    res.status(204).end();
  };

  const operator = (req: Request): void => {
    if (!want) throw new NotFoundError('/codec is not served here: set KILN_OPERATOR_TOKEN to serve the codec server');
    const given = (req.params.token as string | undefined) ?? bearerToken(req);
    if (!given || !timingSafeEqual(digest(given), want)) {
      throw new ApiError(
        401,
        'Unauthenticated',
        'the codec server needs the operator token: Authorization: Bearer <KILN_OPERATOR_TOKEN>, or the endpoint <api>/codec/<KILN_OPERATOR_TOKEN>',
        {},
        { 'WWW-Authenticate': 'Bearer' },
      );
    }
  };

  const convert: RequestHandler = async (req, res, next) => {
    const op = req.params.op;
    if (op !== 'decode' && op !== 'encode') return next();
    operator(req);
    const body = parseOr422(codecBody, req.body ?? {});
    const payloads = body.payloads.map(toPayload);
    let out: Payload[];
    try {
      out = op === 'decode' ? await deps.codec.decode(payloads) : await deps.codec.encode(payloads);
    } catch (err) {
      if ((err as { name?: string }).name === 'NoSuchKey')
        throw new NotFoundError('a referenced payload is not in the store (payloads/sha256/…)');
      throw err;
    }
    res.json({ payloads: out.map(toJson) });
  };

  const json = express.json({ limit: '10mb' });
  for (const path of ['/codec/:op', '/codec/:token/:op']) {
    router.options(path, cors, preflight);
    router.post(path, cors, json, convert);
  }
  return router;
}
