/**
 * The order the suite's files start in: longest first. The lanes take the next file as each comes
 * free (jest's workers, one a lane), so starting the long files first lets the lanes end together.
 */

export interface TimedFile {
  file: string;
  /** Expected duration. */
  seconds: number;
}

/** Longest first; files of equal duration keep their order, so the order is the same for the same input. */
export function longestFirst(files: TimedFile[]): string[] {
  return files
    .map((f, i) => ({ ...f, i }))
    .sort((a, b) => b.seconds - a.seconds || a.i - b.i)
    .map((f) => f.file);
}

/** Each file's expected duration: its last timing, else the median of the known ones (5 s when none is known). */
export function expectedDurations(files: string[], timings: Record<string, number>): TimedFile[] {
  const known = Object.values(timings).sort((a, b) => a - b);
  const fallback = known.length > 0 ? known[Math.floor(known.length / 2)] : 5;
  return files.map((file) => ({ file, seconds: timings[file] ?? fallback }));
}
