/** The API's settings from configuration. */
import { appSettingsOf } from '../../api/app-settings';
import { parseConfig } from '../../lib/config';

/** The variables with no default. */
const required = { S3_ACCESS_KEY_ID: 'k', S3_SECRET_ACCESS_KEY: 's' };

test('defaults give every setting, and no Temporal UI link without its URL', () => {
  const settings = appSettingsOf(parseConfig(required));
  expect(settings.temporalUi).toBeUndefined();
  expect(settings.batches).toEqual({
    parallelism: expect.any(Number),
    chunksPerRun: expect.any(Number),
    maxInputBytes: expect.any(Number),
  });
  expect(Object.values(settings.resources!).every((v) => typeof v === 'number')).toBe(true);
});

test('each setting is the variable that names it', () => {
  const settings = appSettingsOf(
    parseConfig({
      ...required,
      KILN_TEMPORAL_UI_URL: 'http://ui.example:8233',
      TEMPORAL_NAMESPACE: 'ns-1',
      KILN_BATCH_PARALLELISM: '3',
      KILN_MAX_OPEN_STREAMS: '7',
      KILN_CONTROL_QUEUE: 'ctl',
    }),
  );
  expect(settings.temporalUi).toEqual({ url: 'http://ui.example:8233', namespace: 'ns-1' });
  expect(settings.temporalNamespace).toBe('ns-1');
  expect(settings.batches?.parallelism).toBe(3);
  expect(settings.connectionLimits?.maxOpenStreams).toBe(7);
  expect(settings.controlQueue).toBe('ctl');
});
