/** Three tiers: unit tests run anywhere; integration and e2e talk to the real stack, in band. */
const transform = { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] };
// Fixtures are on for the suite's own run, in the test processes as in the stack's.
const setupFiles = ['<rootDir>/test/enable-fixtures.ts'];
// Tests of the stack start each file without the last file's idle HTTP connections (see the file).
const stackEnvironment = '<rootDir>/test/fresh-connections-environment.js';
module.exports = {
  projects: [
    { displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'], transform, setupFiles, testEnvironment: 'node' },
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
