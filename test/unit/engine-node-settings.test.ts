/** An engine node's settings from configuration. */
import { parseConfig } from '../../lib/config';
import { engineNodeSettings } from '../../workers/engine-node-settings';

const required = { S3_ACCESS_KEY_ID: 'k', S3_SECRET_ACCESS_KEY: 's' };

test('sizes are in bytes and milliseconds, as the node counts them', () => {
  const settings = engineNodeSettings(
    parseConfig({ ...required, KILN_NODE_MEMORY_MB: '512', KILN_MODEL_IDLE_TTL_SECONDS: '7', KILN_NODE_ID: 'n-1' }),
  );
  expect(settings).toMatchObject({ nodeId: 'n-1', memoryBytes: 512 * 2 ** 20, idleTtlMs: 7000 });
});

test('only outside the test suite does a node switch to a new llama.cpp build', () => {
  expect(engineNodeSettings(parseConfig({ ...required, KILN_ENV: 'test' })).switchToNewBuild).toBe(false);
  expect(engineNodeSettings(parseConfig({ ...required, KILN_ENV: 'production' })).switchToNewBuild).toBe(true);
});
