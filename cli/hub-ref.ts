/**
 * `hf://OWNER/REPO[@REVISION]/PATH/TO/FILE.gguf`: a file of a Hugging Face-style hub, the URL its
 * download protocol resolves it at, and the Kiln model name a pull gives it by default.
 */
import { CliError } from './client';

export interface HubRef {
  owner: string;
  repo: string;
  /** A branch, tag or commit; `main` unless the reference names one. */
  revision: string;
  /** The file's path inside the repository, `/`-separated. */
  file: string;
}

/** The hub's own rule for owner and repository names. */
const HUB_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;
const PREFIX = 'hf://';

export function parseHubRef(ref: string): HubRef {
  const bad = (why: string) => new CliError(`${ref}: ${why} (expected hf://OWNER/REPO/FILE.gguf or hf://OWNER/REPO@REVISION/FILE.gguf)`);
  if (!ref.startsWith(PREFIX)) throw bad('not an hf:// reference');
  const [owner, repoAt, ...segments] = ref.slice(PREFIX.length).split('/');
  const at = (repoAt ?? '').indexOf('@');
  const repo = at < 0 ? repoAt : repoAt.slice(0, at);
  const revision = at < 0 ? 'main' : repoAt.slice(at + 1);
  if (!owner || !HUB_NAME.test(owner)) throw bad(`owner ${JSON.stringify(owner ?? '')} is not a hub name`);
  if (!repo || !HUB_NAME.test(repo)) throw bad(`repository ${JSON.stringify(repo ?? '')} is not a hub name`);
  if (revision === '') throw bad('the revision after @ is empty');
  if (segments.length === 0 || segments.some((s) => s === '' || s === '.' || s === '..')) throw bad('no file path after the repository');
  const file = segments.join('/');
  if (!/\.gguf$/i.test(file)) throw bad('only GGUF files (.gguf) can be pulled');
  return { owner, repo, revision, file };
}

/** `{base}/{owner}/{repo}/resolve/{revision}/{file}`: where the hub answers for the file (HEAD, then GET). */
export function hubResolveUrl(base: string, ref: HubRef): string {
  const file = ref.file.split('/').map(encodeURIComponent).join('/');
  return `${base.replace(/\/+$/, '')}/${ref.owner}/${ref.repo}/resolve/${encodeURIComponent(ref.revision)}/${file}`;
}

/** The reference written back, revision included: what a model's description records. */
export function formatHubRef(ref: HubRef, revision = ref.revision): string {
  return `${PREFIX}${ref.owner}/${ref.repo}@${revision}/${ref.file}`;
}

/**
 * A Kiln model name from the repository's (`Qwen2.5-0.5B-Instruct-GGUF` → `qwen2.5-0.5b-instruct`):
 * lower case, without the `-GGUF` that hub repositories of converted weights end with. A hub name
 * is then a Kiln name: both take letters, digits, dots, dashes and underscores after a first
 * letter or digit.
 */
export function defaultModelName(ref: HubRef): string {
  return ref.repo.toLowerCase().replace(/[-_.]gguf$/, '');
}
