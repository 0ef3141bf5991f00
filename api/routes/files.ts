/**
 * Replicate's files API: `POST /v1/files` (multipart, field `content`) streams an upload into
 * object storage; `urls.get` is a signed URL that expires, usable without a token. The content
 * is served as an inert download (see untrusted-content.ts); the declared type stays in the JSON.
 */
import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import Busboy from 'busboy';
import { type Request, Router } from 'express';
import { z } from 'zod';
import { activeAccount } from '../../db/accounts';
import type { Db } from '../../db/client';
import { deleteFile, type FileRow, getFile, insertFile, listFiles } from '../../db/files';
import { byteMeter } from '../../lib/byte-meter';
import { fileKey } from '../../lib/file-keys';
import { cleanFileName } from '../../lib/file-name';
import { FILE_URL_TTL_SECONDS, signedFileUrl, verifyFileUrl } from '../../lib/file-urls';
import { newId } from '../../lib/ids';
import type { UrlSigner } from '../../lib/signing';
import type { Storage } from '../../lib/storage';
import { currentAccount, optionalAccount } from '../auth';
import { ApiError, BadRequestError, NotFoundError, UnauthorizedError } from '../errors';
import { errorBody, fileBody } from '../response-schemas';
import { errorResponses, jsonResponse, pageOf, pathParams, type RouteContract, signedUrlQuery } from '../route-contract';
import { untrustedContentHeaders } from '../untrusted-content';

export interface FileDeps {
  db: Db;
  storage: Storage;
  signer: UrlSigner;
  baseUrl: (req: Request) => string;
  maxUploadBytes: number;
}

export function fileJson(f: FileRow, baseUrl: string, signer: UrlSigner) {
  return {
    id: f.id,
    name: f.name,
    content_type: f.contentType,
    size: f.size,
    etag: f.sha256,
    checksums: { sha256: f.sha256 },
    metadata: {},
    created_at: f.createdAt.toISOString(),
    expires_at: f.expiresAt?.toISOString() ?? null,
    urls: { get: signedFileUrl(baseUrl, signer, f.id) },
  };
}

/** The signed content route sits outside the token check: the signature is the permission. */
export function fileContentRoute(deps: FileDeps): Router {
  const router = Router();
  router.get('/v1/files/:id/content', async (req, res) => {
    const file = await getFile(deps.db, req.params.id);
    const signed = verifyFileUrl(deps.signer, req.params.id, req.query.expires, req.query.sig);
    if (!signed) {
      const account = await optionalAccount(deps.db, req);
      if (!account) throw new UnauthorizedError('The link has expired or is not signed: ask the API for a fresh one');
      if (!file || file.accountId !== account.id) throw new NotFoundError(`File ${req.params.id} not found`);
    }
    if (!file) throw new NotFoundError(`File ${req.params.id} not found`);
    // A signed URL answers to its account's state at each use: a disabled account's links stop working.
    if (signed && !(await activeAccount(deps.db, file.accountId))) {
      throw new UnauthorizedError('The account this file belongs to is disabled');
    }
    const content = await deps.storage.read(fileKey(file.id));
    untrustedContentHeaders(res, file);
    res.set({
      'Content-Length': String(file.size),
      'Cache-Control': `private, max-age=${FILE_URL_TTL_SECONDS}`,
      ETag: `"${file.sha256}"`,
    });
    await pipeline(content, res);
  });
  return router;
}

export function fileRoutes(deps: FileDeps): Router {
  const router = Router();
  const { db, storage, signer } = deps;

  router.post('/files', async (req, res) => {
    if (!req.is('multipart/form-data')) throw new BadRequestError('Send the file as multipart/form-data, in a field named content');
    const account = currentAccount(res);
    const id = newId();
    let bb: Busboy.Busboy;
    try {
      // Browsers send file names in UTF-8; busboy's default reads them as latin1.
      bb = Busboy({ headers: req.headers, defParamCharset: 'utf8', limits: { files: 1, fileSize: deps.maxUploadBytes } });
    } catch (err) {
      // No boundary, or a content type busboy cannot read: the client's request, not a fault.
      throw new BadRequestError(`Content-Type: ${(err as Error).message}; send multipart/form-data with a boundary`);
    }
    const stored = await new Promise<{ name: string; contentType: string; size: number; sha256: string }>((resolve, reject) => {
      let got = false;
      bb.on('file', (field, stream, info) => {
        if (field !== 'content') {
          stream.resume();
          return;
        }
        got = true;
        const hash = createHash('sha256');
        let size = 0;
        const meter = byteMeter((chunk) => {
          size += chunk.length;
          hash.update(chunk);
        });
        stream.on('limit', () =>
          meter.destroy(new ApiError(413, 'Payload too large', `files are limited to ${deps.maxUploadBytes} bytes`)),
        );
        Promise.all([pipeline(stream, meter), storage.putStream(fileKey(id), meter)])
          .then(() =>
            resolve({
              name: cleanFileName(info.filename ?? ''),
              contentType: info.mimeType || 'application/octet-stream',
              size,
              sha256: hash.digest('hex'),
            }),
          )
          .catch(async (err) => {
            await storage.delete(fileKey(id)).catch(() => undefined);
            reject(err);
          });
      });
      // Busboy's own errors are about the form it was sent (truncated, malformed parts).
      bb.on('error', (err: Error) => reject(new BadRequestError(`content: the multipart form is malformed (${err.message})`)));
      bb.on('close', () => {
        if (!got) reject(new BadRequestError('No file in the form: put it in a field named content'));
      });
      req.pipe(bb);
    });
    const row = await insertFile(db, { id, accountId: account.id, ...stored });
    res.status(201).json(fileJson(row, deps.baseUrl(req), signer));
  });

  router.get('/files', async (req, res) => {
    const rows = await listFiles(db, currentAccount(res).id);
    res.json({ next: null, previous: null, results: rows.map((f) => fileJson(f, deps.baseUrl(req), signer)) });
  });

  router.get('/files/:id', async (req, res) => {
    const file = await getFile(db, req.params.id);
    if (!file || file.accountId !== currentAccount(res).id) throw new NotFoundError(`File ${req.params.id} not found`);
    res.json(fileJson(file, deps.baseUrl(req), signer));
  });

  router.delete('/files/:id', async (req, res) => {
    const file = await deleteFile(db, currentAccount(res).id, req.params.id);
    if (!file) throw new NotFoundError(`File ${req.params.id} not found`);
    await storage.delete(fileKey(file.id)).catch(() => undefined);
    res.status(204).end();
  });

  return router;
}

export const fileContracts: RouteContract[] = [
  {
    method: 'post',
    path: '/v1/files',
    summary: 'Upload a file (multipart, field content)',
    request: { body: { content: { 'multipart/form-data': { schema: z.object({ content: z.string().meta({ format: 'binary' }) }) } } } },
    responses: {
      '201': jsonResponse('The file, with a signed urls.get', fileBody),
      '400': jsonResponse('Not multipart, or no field named content', errorBody),
      '413': jsonResponse('Over the upload size limit', errorBody),
      ...errorResponses,
    },
  },
  {
    method: 'get',
    path: '/v1/files',
    summary: 'Your files',
    responses: { '200': jsonResponse('A page', pageOf(fileBody)), ...errorResponses },
  },
  {
    method: 'get',
    path: '/v1/files/{id}',
    summary: 'A file',
    request: { params: pathParams('id') },
    responses: { '200': jsonResponse('The file, with a fresh signed urls.get', fileBody), ...errorResponses },
  },
  {
    method: 'delete',
    path: '/v1/files/{id}',
    summary: 'Delete a file',
    request: { params: pathParams('id') },
    responses: { '204': { description: 'Deleted' }, ...errorResponses },
  },
  {
    method: 'get',
    path: '/v1/files/{id}/content',
    summary:
      "A file's bytes (use urls.get). Always a download (Content-Disposition: attachment) under a sandboxing CSP; types a browser could run are sent as application/octet-stream",
    security: [{}, { bearer: [] }],
    request: { params: pathParams('id'), query: signedUrlQuery },
    responses: {
      '200': { description: 'The bytes', content: { 'application/octet-stream': { schema: z.string().meta({ format: 'binary' }) } } },
      '401': jsonResponse('Expired or unsigned, and no token; or the account is disabled', errorBody),
      '404': errorResponses['404'],
    },
  },
];
