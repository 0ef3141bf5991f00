/** Test files split over lanes so that the lanes end together: longest first, each to the lane with the least so far. */

export interface LaneFile {
  file: string;
  /** Expected duration. */
  seconds: number;
}

export interface Lane {
  files: string[];
  seconds: number;
}

/** At most `lanes` lanes, none empty; files of equal duration keep their order, so a plan is the same for the same input. */
export function partitionByDuration(files: LaneFile[], lanes: number): Lane[] {
  if (!Number.isInteger(lanes) || lanes < 1) throw new RangeError(`lanes must be a positive integer (got ${lanes})`);
  const split: Lane[] = Array.from({ length: Math.min(lanes, Math.max(files.length, 1)) }, () => ({ files: [], seconds: 0 }));
  const longestFirst = files.map((f, i) => ({ ...f, i })).sort((a, b) => b.seconds - a.seconds || a.i - b.i);
  for (const f of longestFirst) {
    const lane = split.reduce((least, l) => (l.seconds < least.seconds ? l : least));
    lane.files.push(f.file);
    lane.seconds += f.seconds;
  }
  return split;
}
