import { Transform } from 'node:stream';

/**
 * A pass-through that sees every chunk on its way (to count, hash or report progress);
 * returning an Error from `onChunk` stops the stream with it.
 */
export function byteMeter(onChunk: (chunk: Buffer) => Error | void): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      const err = onChunk(chunk);
      if (err) done(err);
      else done(null, chunk);
    },
  });
}
