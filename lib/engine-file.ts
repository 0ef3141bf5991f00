/**
 * Which of a version's files an engine loads: the first one with the engine's suffix (`.gguf`,
 * `.onnx`), else the first file. The API checks and sizes the same file the engine will load.
 */
export function engineFileIndex(files: readonly { path: string }[], suffix: string): number {
  return Math.max(
    files.findIndex((f) => f.path.endsWith(suffix)),
    0,
  );
}
