/** The client tests' spec check fails on a response the contracts do not describe. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { specCheckedFetch } from '../spec-checked-fetch';

let server: http.Server;
let base: string;
/** What the fake server answers GET /v1/webhooks/default/secret with. */
let answer: { status: number; body: unknown };

beforeAll(async () => {
  server = http.createServer((_req, res) =>
    res.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body)),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

async function check(status: number, body: unknown, path = '/v1/webhooks/default/secret') {
  answer = { status, body };
  const spec = specCheckedFetch();
  await (await spec.fetch(`${base}${path}`)).text();
  return spec;
}

test('a response of the documented shape passes', async () => {
  const spec = await check(200, { key: 'whsec_abc' });
  expect(spec.problems).toEqual([]);
  expect(spec.seen).toEqual(['GET /v1/webhooks/default/secret 200']);
});

test('a wrong type, an undeclared field, an undocumented status or path each fail', async () => {
  expect((await check(200, { key: 42 })).problems).toEqual([
    expect.stringMatching(/GET \/v1\/webhooks\/default\/secret 200: key: .*expected string/),
  ]);
  expect((await check(200, { key: 'whsec_abc', extra: true })).problems).toEqual([
    'GET /v1/webhooks/default/secret 200: undeclared field extra',
  ]);
  expect((await check(418, {})).problems).toEqual(["GET /v1/webhooks/default/secret 418: status not among the operation's responses"]);
  expect((await check(200, {}, '/v1/nothing')).problems).toEqual(['GET /v1/nothing 200: no operation in the spec']);
});
