/**
 * How often a generating prediction or a download heartbeats at most (tokens may come every
 * millisecond, download progress every MiB).
 */
const HEARTBEAT_EVERY_MS = 100;

/**
 * True at most once per HEARTBEAT_EVERY_MS: every heartbeat call converts its details for the SDK
 * even when it sends nothing, and a few a second carry cancellation soon enough.
 */
export function heartbeatThrottle(): () => boolean {
  let last = 0;
  return () => {
    const now = performance.now();
    if (now - last < HEARTBEAT_EVERY_MS) return false;
    last = now;
    return true;
  };
}
