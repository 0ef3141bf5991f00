/** Response text rules of the llama.cpp engine: clean UTF-8. */

/**
 * Generated text without U+FFFD: node-llama-cpp holds back a character split across tokens until
 * it is whole, so what still decodes to U+FFFD is bytes that never make a character (a lone byte
 * token of a model, a token cut off by max_tokens mid-character). They are dropped rather than
 * shown as replacement characters in the stream and the output, and so is NUL.
 */
export function cleanText(text: string): string {
  // U+0000 too (a 0x00 byte token): Postgres cannot hold it, and the projection would show it as U+FFFD.
  return text.replace(/[\uFFFD\u0000]/g, '');
}
