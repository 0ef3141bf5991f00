/**
 * The string formats OpenAI's strict structured outputs accept, as the regular expressions the
 * grammar writes them by (domain/grammar/pattern.ts). Each matches only valid values, if not all
 * of them (a UUID of RFC 9562's layout; an IPv6 address in full, eight groups; a duration of one
 * part, or days and hours).
 * date, time and date-time are node-llama-cpp's own.
 */
const OCTET = '(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])';
const LABEL = '[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?';

export const FORMAT_PATTERNS = {
  email: '^[a-zA-Z0-9._%+-]{1,64}@[a-zA-Z0-9-]{1,63}(\\.[a-zA-Z0-9-]{1,63}){1,8}$',
  // RFC 9562's layout: a version digit, then the variant bits (10xx).
  uuid: '^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$',
  hostname: `^${LABEL}(\\.${LABEL}){0,8}$`,
  ipv4: `^${OCTET}(\\.${OCTET}){3}$`,
  ipv6: '^[0-9a-f]{1,4}(:[0-9a-f]{1,4}){7}$',
  duration: '^P([0-9]{1,9}W|[0-9]{1,9}D(T[0-9]{1,9}H)?|T[0-9]{1,9}[HMS])$',
} as const;

/** Formats node-llama-cpp's generator writes itself. */
export const NATIVE_FORMATS = ['date-time', 'date', 'time'] as const;

export type StringFormat = keyof typeof FORMAT_PATTERNS | (typeof NATIVE_FORMATS)[number];
export const STRING_FORMATS = [...NATIVE_FORMATS, ...(Object.keys(FORMAT_PATTERNS) as Array<keyof typeof FORMAT_PATTERNS>)] as [
  StringFormat,
  ...StringFormat[],
];
