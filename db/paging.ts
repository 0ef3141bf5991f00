/**
 * Cursor pages, newest first, as predictions and batches are listed: the cursor is the last row
 * of the previous page (created_at, id), so inserts never shift a page.
 */
import { and, eq, lt, or, type SQL } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';

export interface PageCursor {
  createdAt: string;
  id: string;
}

export function encodeCursor(c: PageCursor): string {
  return Buffer.from(JSON.stringify([c.createdAt, c.id])).toString('base64url');
}

export function decodeCursor(raw: string): PageCursor | undefined {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (typeof createdAt !== 'string' || typeof id !== 'string' || Number.isNaN(Date.parse(createdAt))) return undefined;
    return { createdAt, id };
  } catch {
    return undefined;
  }
}

/** Rows after the cursor in (created_at desc, id desc) order; no condition without a cursor. */
export function afterCursor(createdAt: PgColumn, id: PgColumn, cursor: PageCursor | undefined): SQL | undefined {
  if (!cursor) return undefined;
  const at = new Date(cursor.createdAt);
  return or(lt(createdAt, at), and(eq(createdAt, at), lt(id, cursor.id)));
}

/** A page from `limit + 1` rows read: the first `limit`, and the cursor of the next page if there is one. */
export function pageOf<R extends { createdAt: Date; id: string }>(rows: R[], limit: number): { rows: R[]; next?: PageCursor } {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { rows: page, next: rows.length > limit && last ? { createdAt: last.createdAt.toISOString(), id: last.id } : undefined };
}
