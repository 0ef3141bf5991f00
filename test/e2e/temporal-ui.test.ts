/**
 * The Temporal Web UI that npm start prints is up and shows the suite's namespace: the dev
 * server's built-in UI, or with KILN_TEMPORAL=server the UI server that infra/temporal-server.sh
 * starts beside the full server.
 */
const UI_URL = process.env.KILN_TEMPORAL_UI_URL ?? 'http://127.0.0.1:8233';
const NAMESPACE = process.env.TEMPORAL_NAMESPACE ?? 'kiln-test';

test('the Temporal UI serves its page and reads the namespace from the server', async () => {
  const page = await fetch(`${UI_URL}/namespaces/${NAMESPACE}/workflows`);
  expect(page.status).toBe(200);
  expect(page.headers.get('content-type')).toMatch(/text\/html/);
  expect(await page.text()).toMatch(/<html/i);

  // The UI's own API, which the page calls: it reaches the Temporal frontend over gRPC.
  const ns = await fetch(`${UI_URL}/api/v1/namespaces/${NAMESPACE}`);
  expect(ns.status).toBe(200);
  expect(((await ns.json()) as any).namespaceInfo).toMatchObject({ name: NAMESPACE, state: 'NAMESPACE_STATE_REGISTERED' });
});
