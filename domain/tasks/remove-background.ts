import { z } from 'zod';

/** `data:image/<type>[;param=value]*;base64,<payload>` */
const IMAGE_DATA_URI = /^data:image\/[a-z0-9.+-]+(?:;[a-z0-9-]+=[^;,]*)*;base64,([a-z0-9+/]*={0,2})$/i;

/**
 * An image to cut out: an http(s) URL, or the image inline as a base64 data URI. The API's
 * 10 MB body limit bounds the data URI before this does.
 */
export const removeBackgroundInput = z.strictObject({
  image: z
    .string()
    .max(10_000_000)
    .refine((s) => IMAGE_DATA_URI.test(s) || z.url({ protocol: /^https?$/ }).safeParse(s).success, {
      message: 'must be an http(s) URL or a data:image/...;base64,... URI',
    })
    .describe('The image: an http(s) URL or a data:image/...;base64,... URI'),
});

/** The URL of the PNG, the image with its background made transparent. */
export const removeBackgroundOutput = z.string().describe('URL of the transparent PNG');

export type RemoveBackgroundInput = z.output<typeof removeBackgroundInput>;
