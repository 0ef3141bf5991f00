import { ApplicationFailure } from '@temporalio/common';

/**
 * Every business failure Kiln raises on purpose. A failure of one of these types is final;
 * any other error is a fault worth retrying.
 */
export type KilnFailureType =
  | 'AccountDisabled'
  | 'ModelVersionNotFound'
  | 'InvalidInput'
  | 'ModelTooLarge'
  | 'ModelFileCorrupt'
  | 'ModelLoadFailed'
  | 'OverCapacity';

export const NON_RETRYABLE_TYPES: KilnFailureType[] = [
  'AccountDisabled',
  'ModelVersionNotFound',
  'InvalidInput',
  'ModelTooLarge',
  'ModelFileCorrupt',
  'ModelLoadFailed',
  'OverCapacity',
];

export function kilnFailure(type: KilnFailureType, message: string): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: NON_RETRYABLE_TYPES.includes(type) });
}
