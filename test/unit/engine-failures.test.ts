/** Engines throw their own errors; activities hand Temporal a failure of the same type, cause kept. */
import { ApplicationFailure } from '@temporalio/common';
import { mappingEngineErrors, toActivityFailure } from '../../activities/engine-failures';
import { EngineError } from '../../engines/engine-error';
import { KilnError } from '../../lib/kiln-error';

test('an engine error becomes a Temporal failure of its type, retryable as the taxonomy says, with its cause', () => {
  const native = new Error('llama_model_load: tensor data is not within file bounds');
  const err = new EngineError('ModelLoadFailed', 'llama.cpp could not load the model', { cause: native });
  expect(err).toBeInstanceOf(KilnError);
  expect(err.name).toBe('EngineError');
  expect(err.cause).toBe(native);
  const failure = toActivityFailure(err) as ApplicationFailure;
  expect(failure).toBeInstanceOf(ApplicationFailure);
  expect(failure).toMatchObject({ type: 'ModelLoadFailed', message: 'llama.cpp could not load the model', nonRetryable: true });
  expect(failure.cause).toBe(err);
  expect((toActivityFailure(new EngineError('EngineFault', 'decode failed')) as ApplicationFailure).nonRetryable).toBe(false);
});

test('errors that are not the engine’s pass through unchanged', () => {
  const plain = new Error('socket hang up');
  expect(toActivityFailure(plain)).toBe(plain);
});

test('a wrapped activity throws the mapped failure', async () => {
  const run = mappingEngineErrors(async (prompt: string) => {
    throw new EngineError('ContextLengthExceeded', `input.prompt: ${prompt.length} tokens`);
  });
  await expect(run('long')).rejects.toMatchObject({ type: 'ContextLengthExceeded', nonRetryable: true });
  await expect(mappingEngineErrors(async () => 42)()).resolves.toBe(42);
});
