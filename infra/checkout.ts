import path from 'node:path';

/** The checkout's root: infra/env.sh exports it; otherwise found from this file, in infra/ or dist/infra/. */
export const KILN_ROOT =
  process.env.KILN_ROOT ?? path.resolve(__dirname, path.basename(path.resolve(__dirname, '..')) === 'dist' ? '../..' : '..');
