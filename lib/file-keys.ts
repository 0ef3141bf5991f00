/** Where uploaded and output files live in object storage, and how outputs refer to them. */

export const fileKey = (id: string): string => `files/${id}`;

/**
 * How outputs refer to files inside Kiln: `kiln-file:<id>.<signature>`. The API turns a reference
 * into a signed URL when it answers; the signature keeps a model from naming someone else's file.
 */
export const FILE_REF_PREFIX = 'kiln-file:';
