/**
 * jest's testSequencer for npm test's lanes: the files start in the order infra/test.sh wrote to
 * KILN_TEST_ORDER (longest first, by the last run's durations, infra/test-order.ts), so the lanes,
 * each taking the next file as it comes free, end together. Without that file, jest's own order.
 */
const Sequencer = require('@jest/test-sequencer').default;
const { existsSync, readFileSync } = require('node:fs');

class TimingsSequencer extends Sequencer {
  sort(tests) {
    const file = process.env.KILN_TEST_ORDER;
    if (!file || !existsSync(file)) return super.sort(tests);
    const rank = new Map(JSON.parse(readFileSync(file, 'utf8')).map((path, i) => [path, i]));
    const at = (test) => rank.get(test.path) ?? rank.size;
    return [...tests].sort((a, b) => at(a) - at(b));
  }
}

module.exports = TimingsSequencer;
