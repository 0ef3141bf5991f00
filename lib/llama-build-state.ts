/**
 * Where this host's llama.cpp source build stands (infra/llama-addon-build.sh): built, under way
 * (FOLDER.building, written by the building process), failed (FOLDER.failed, which npm start's
 * background build does not retry), or not there. For npm run status and the start line.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { hostCpuBuildDir } from './llama-cpu-build';
import { processAlive } from './pid-files';

export type SourceBuildState =
  | { state: 'built'; dir: string; builtAt?: string }
  | { state: 'building'; dir: string; pid: number; startedAt: string; log: string }
  | { state: 'failed'; dir: string; at: string; exitCode: number; log: string }
  | { state: 'absent'; dir: string };

function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

export function sourceBuildState(dir = hostCpuBuildDir('addon')): SourceBuildState {
  if (existsSync(path.join(dir, 'llama-addon.node')))
    return { state: 'built', dir, builtAt: readJson<{ built?: string }>(path.join(dir, 'kiln-build.json'))?.built };
  const building = readJson<{ pid: number; startedAt: string; log: string }>(`${dir}.building`);
  if (building && processAlive(building.pid)) return { state: 'building', dir, ...building };
  const failed = readJson<{ at: string; exitCode: number; log: string }>(`${dir}.failed`);
  if (failed) return { state: 'failed', dir, ...failed };
  return { state: 'absent', dir };
}

if (require.main === module) console.log(JSON.stringify(sourceBuildState()));
