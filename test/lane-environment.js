/**
 * jest's test environment for npm test's lanes. With several lanes, one jest runs the suite on one
 * worker a lane (infra/test.sh), and each worker takes on its lane's environment (ports, database,
 * Temporal namespace, bucket, ...; written by test.sh to KILN_TEST_LANES_DIR/lane-<K>.env.json) before
 * its first file: the process's own environment, so the processes a test starts inherit it too.
 * Worker N (JEST_WORKER_ID) is lane N − 1. With one lane (jest in band), the environment is already the lane's.
 */
const { TestEnvironment } = require('jest-environment-node');
const { readFileSync } = require('node:fs');
const path = require('node:path');

function joinLane() {
  const dir = process.env.KILN_TEST_LANES_DIR;
  const worker = Number(process.env.JEST_WORKER_ID);
  if (!dir || !Number.isInteger(worker) || worker < 1) return;
  const lane = JSON.parse(readFileSync(path.join(dir, `lane-${worker - 1}.env.json`), 'utf8'));
  Object.assign(process.env, lane);
}

class LaneEnvironment extends TestEnvironment {
  constructor(config, context) {
    joinLane();
    super(config, context);
  }
}

module.exports = LaneEnvironment;
