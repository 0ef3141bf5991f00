/**
 * @jest-environment ./test/native-typed-arrays-environment.js
 */
/**
 * The web playground at `/`, driven in headless Chromium (Debian's package, through
 * playwright-core): sign in with a token, generate text with streamed tokens, cut out an
 * uploaded image, see a validation error on the field, follow history to the Temporal UI, retry
 * a failed prediction.
 * Screenshots of the finished predictions are saved under the run directory.
 */
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { closeDb, type Db } from '../../db/client';
import { loadSharp } from '../../engines/onnx/engine';
import { echoFixtureVersion } from '../fixtures/echo-versions';
import { API_URL, api, newAccount, poll, testDb } from '../helpers';

jest.setTimeout(180_000);

const CHROMIUM = process.env.KILN_CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = path.join(process.env.KILN_RUN_DIR ?? '.data/test', 'screenshots');

let db: Db;
let token: string;
let username: string;
let browser: Browser;
let page: Page;
/** What Chromium reports breaking the Content-Security-Policy, on any page of the suite. */
const cspViolations: string[] = [];

/** Every page counts CSP violations, from before its own scripts run. */
async function watchCsp(p: Page) {
  await p.exposeFunction('reportCspViolation', (v: string) => cspViolations.push(`${p.url()}: ${v}`)).catch(() => undefined);
  // A string, not a function: the test's TypeScript has no DOM types.
  await p.addInitScript(
    `document.addEventListener('securitypolicyviolation', (e) => window.reportCspViolation(e.violatedDirective + ' ' + e.blockedURI));`,
  );
  p.on('console', (m) => {
    if (/Content.Security.Policy/i.test(m.text())) cspViolations.push(`${p.url()}: ${m.text()}`);
  });
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`Chromium is not at ${CHROMIUM}: infra/install.sh installs Debian's chromium package for the tests`);
  mkdirSync(SHOTS, { recursive: true });
  db = testDb();
  const account = await newAccount(db, 'playground');
  token = account.token;
  username = account.account.username;
  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await watchCsp(page);
});
afterEach(() => {
  // Nothing the playground does may trip its own policy.
  expect(cspViolations).toEqual([]);
});
afterAll(async () => {
  await browser?.close();
  await closeDb(db);
});

async function signIn(p: Page) {
  await p.goto(`${API_URL}/#token=${token}`);
  await p.locator('#whoami').filter({ hasText: 'Signed in as playground-' }).waitFor();
}

test('a bad token is refused on the sign-in form', async () => {
  const p = await browser.newPage();
  await watchCsp(p);
  await p.goto(`${API_URL}/`);
  await p.locator('#token').fill('kiln_not-a-real-token');
  await p.locator('#login-form button[type=submit]').click();
  await p.locator('#login-error').filter({ hasText: 'not valid' }).waitFor();
  expect(await p.locator('#app').isHidden()).toBe(true);
  await p.close();
});

test('text generation: a form from the schema, streamed tokens, the finished prediction, history with a Temporal link', async () => {
  await signIn(page);
  // The token left the address bar as soon as it was read.
  expect(page.url()).not.toContain('token=');
  await page.locator('#models button[data-model="kiln/tiny-llama"]').click();
  await page.locator('#model-name').filter({ hasText: 'kiln/tiny-llama' }).waitFor();
  // Fields, defaults and bounds come from the version's input schema.
  expect(await page.locator('#field-max_tokens').inputValue()).toBe('128');
  expect(await page.locator('#field-max_tokens').getAttribute('max')).toBe('8192');
  expect(await page.locator('#field-messages').getAttribute('data-kind')).toBe('json');

  await page.locator('#field-prompt').fill('The kiln was');
  await page.locator('#field-max_tokens').fill('24');
  await page.locator('#field-seed').fill('7');
  await page.locator('#run').click();
  await page.locator('#status.succeeded').waitFor({ timeout: 120_000 });

  const id = (await page.locator('#prediction-id').textContent())!;
  const stored = await api(`/v1/predictions/${id}`, { token });
  expect(stored.body.status).toBe('succeeded');
  expect(stored.body.input).toMatchObject({ prompt: 'The kiln was', max_tokens: 24, seed: 7 });
  const text = (stored.body.output as string[]).join('');
  expect(text.length).toBeGreaterThan(0);
  expect(await page.locator('[data-testid=output-text]').textContent()).toBe(text);
  expect(await page.locator('#logs').textContent()).toBe(stored.body.logs);
  expect(await page.locator('#metrics').textContent()).toContain('predict_time');

  const row = page.locator(`#history tr[data-id="${id}"]`);
  await row.waitFor();
  const link = await row.locator('a').getAttribute('href');
  expect(link).toBe(
    `${process.env.KILN_TEMPORAL_UI_URL ?? 'http://127.0.0.1:8233'}/namespaces/${process.env.TEMPORAL_NAMESPACE ?? 'kiln-test'}/workflows/prediction-${id}`,
  );
  expect(await page.locator('#run-link').getAttribute('href')).toBe(link);
  await page.screenshot({ path: path.join(SHOTS, 'playground-text.png'), fullPage: true });
});

test('a failed prediction opened from history has a Retry button: it runs again as a new run of the same prediction, and the page follows it', async () => {
  // A version with no second attempt: the echo fixture's first attempt of the prediction fails, its retry's succeeds.
  const version = (await echoFixtureVersion(token, username, 'playground-flaky', { retry: { max_attempts: 1 } })).id;
  const created = await api('/v1/predictions', { token, body: { version, input: { text: 'second time lucky', fail_attempts: 1 } } });
  expect(created.status).toBe(201);
  const failed = await poll(
    () => api(`/v1/predictions/${created.body.id}`, { token }),
    (r) => r.body.status === 'failed',
  ).then((r) => r.body);

  await signIn(page);
  await page.locator(`#history tr[data-id="${failed.id}"]`).click();
  await page.locator('#status.failed').waitFor();
  expect(await page.locator('#prediction-id').textContent()).toBe(failed.id);
  await page.locator('#retry').click();
  await page.locator('#status.succeeded').waitFor({ timeout: 60_000 });
  expect(await page.locator('#prediction-id').textContent()).toBe(failed.id);
  expect(await page.locator('[data-testid=output-text]').textContent()).toBe('second time lucky');
  expect(await page.locator('#retry').isHidden()).toBe(true);
  // One id, a new run of its workflow.
  const after = await api(`/v1/predictions/${failed.id}`, { token });
  expect(after.body).toMatchObject({ status: 'succeeded', output: 'second time lucky' });
  expect(after.body.run_id).not.toBe(failed.run_id);
  await page.screenshot({ path: path.join(SHOTS, 'playground-retry.png'), fullPage: true });
});

test('a wrong field is named and marked, and nothing starts', async () => {
  await signIn(page);
  await page.locator('#models button[data-model="kiln/tiny-llama"]').click();
  await page.locator('#model-name').filter({ hasText: 'kiln/tiny-llama' }).waitFor();
  const before = await api('/v1/predictions', { token });
  await page.locator('#field-prompt').fill('');
  await page.locator('#field-max_tokens').fill('0');
  await page.locator('#run').click();
  await page.locator('#form-error').filter({ hasText: 'input.max_tokens' }).waitFor();
  expect(await page.locator('.field[data-field="max_tokens"]').getAttribute('class')).toContain('invalid');
  await page.locator('#field-messages').fill('[{"role": "user"');
  await page.locator('#field-max_tokens').fill('8');
  await page.locator('#run').click();
  await page.locator('#form-error').filter({ hasText: 'messages: not valid JSON' }).waitFor();
  const after = await api('/v1/predictions', { token });
  expect(after.body.results.length).toBe(before.body.results.length);
});

test('remove-background: an uploaded image in, the cut-out on a checkerboard out', async () => {
  const sharp = await loadSharp();
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="240" height="160"><rect width="100%" height="100%" fill="white"/><circle cx="120" cy="80" r="50" fill="#d01818"/></svg>`;
  const png = await sharp(Buffer.from(svg)).png().toBuffer();

  await signIn(page);
  await page.locator('#models button[data-model="kiln/remove-background"]').click();
  await page.locator('#model-name').filter({ hasText: 'kiln/remove-background' }).waitFor();
  await page.locator('.field[data-field="image"] input[type=file]').setInputFiles({ name: 'disc.png', mimeType: 'image/png', buffer: png });
  await poll(
    () => page.locator('#field-image').inputValue(),
    (v) => /\/v1\/files\/[a-z2-7]{26}\/content\?/.test(v),
  );
  await page.locator('#run').click();
  await page.locator('#status.succeeded').waitFor({ timeout: 120_000 });

  const img = page.locator('.checkerboard img[data-testid=output-image]');
  await img.waitFor();
  // The browser decoded the PNG the API served: its size is the input's.
  const size = await poll(
    () => img.evaluate((i: any) => (i.complete ? [i.naturalWidth, i.naturalHeight] : [0, 0])),
    ([w]) => w > 0,
  );
  expect(size).toEqual([240, 160]);
  await page.screenshot({ path: path.join(SHOTS, 'playground-remove-background.png'), fullPage: true });
  expect(existsSync(path.join(SHOTS, 'playground-remove-background.png'))).toBe(true);
});

test('the page runs only its own script files, and keeps the token out of local storage and the address bar', async () => {
  // One browser profile, two tabs: local storage is shared between them, session storage is not.
  const context = await browser.newContext();
  const p = await context.newPage();
  await watchCsp(p);
  const res = (await p.goto(`${API_URL}/#token=${token}`))!;
  const csp = res.headers()['content-security-policy'];
  expect(csp).toContain("script-src 'self'");
  expect(csp).toContain("default-src 'none'");
  expect(csp).not.toContain('unsafe-inline');
  expect(csp).not.toContain('unsafe-eval');
  // No inline script or inline handler for the policy to allow.
  const html = await (await fetch(`${API_URL}/`)).text();
  expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/i);
  expect(html).not.toMatch(/\son[a-z]+\s*=/i);
  await p.locator('#whoami').filter({ hasText: 'Signed in as playground-' }).waitFor();
  expect(p.url()).not.toContain(token);
  const stored = await p.evaluate<string>('JSON.stringify({ ...localStorage })');
  expect(stored).not.toContain(token);
  // A reload in the same tab keeps the session; a new tab (a new session) asks again.
  await p.reload();
  await p.locator('#whoami').filter({ hasText: 'Signed in as playground-' }).waitFor();
  expect(p.url()).not.toContain(token);
  const fresh = await context.newPage();
  await watchCsp(fresh);
  await fresh.goto(`${API_URL}/`);
  await fresh.locator('#login').waitFor();
  expect(await fresh.evaluate<string>('JSON.stringify({ ...localStorage })')).not.toContain(token);
  // Forgetting the token forgets it everywhere the page kept it.
  await p.locator('#logout').click();
  await p.locator('#login').waitFor();
  expect(await p.evaluate<string>('JSON.stringify({ ...localStorage, ...sessionStorage })')).not.toContain(token);
  await context.close();
});

test('the API reference renders under its policy: its inline script runs by hash, nothing else would', async () => {
  const p = await browser.newPage();
  await watchCsp(p);
  const res = (await p.goto(`${API_URL}/docs`))!;
  expect(res.headers()['content-security-policy']).toMatch(/script-src 'sha256-/);
  await p.locator('#ops .op').first().waitFor();
  expect(await p.locator('#ops .op').count()).toBeGreaterThan(10);
  await p.close();
});
