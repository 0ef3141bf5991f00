/**
 * Ids and names in paths reach SQL as text, and Postgres text holds neither NUL nor invalid
 * UTF-8: a path segment with a control character or broken percent-encoding is refused here,
 * before any route reads it, with a 400 that says which, instead of failing as a query.
 */
import type { RequestHandler } from 'express';
import { BadRequestError } from './errors';

const CONTROL = /[\u0000-\u001f\u007f]/;

export const rejectMalformedPath: RequestHandler = (req, _res, next) => {
  for (const segment of req.path.split('/')) {
    const shown = JSON.stringify(segment.length > 64 ? `${segment.slice(0, 64)}…` : segment);
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      return next(new BadRequestError(`path: segment ${shown} is not valid percent-encoded UTF-8`));
    }
    if (CONTROL.test(decoded)) return next(new BadRequestError(`path: segment ${shown} holds a control character`));
  }
  next();
};
