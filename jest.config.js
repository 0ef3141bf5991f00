/** Three tiers: unit tests run anywhere; integration and e2e talk to the real stack, in band. */
const transform = { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] };
// Fixtures are on for the suite's own run, in the test processes as in the stack's.
const setupFiles = ['<rootDir>/test/enable-fixtures.ts'];
// Each worker takes on its lane's environment (see the file).
const laneEnvironment = '<rootDir>/test/lane-environment.js';
// Tests of the stack also start each file without the last file's idle HTTP connections (see the file).
const stackEnvironment = '<rootDir>/test/fresh-connections-environment.js';
module.exports = {
  // npm test's lanes start the longest files first (see the file).
  testSequencer: '<rootDir>/test/timings-sequencer.js',
  projects: [
    { displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'], transform, setupFiles, testEnvironment: laneEnvironment },
    {
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      transform,
      setupFiles,
      testEnvironment: stackEnvironment,
    },
    {
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/e2e/**/*.test.ts'],
      transform,
      setupFiles,
      testEnvironment: stackEnvironment,
    },
  ],
};
