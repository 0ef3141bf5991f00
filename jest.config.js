/** Three tiers: unit tests run anywhere; integration and e2e talk to the real stack, in band. */
const transform = { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] };
// Fixtures are on for the suite's own run, in the test processes as in the stack's.
const setupFiles = ['<rootDir>/test/enable-fixtures.ts'];
module.exports = {
  projects: [
    { displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'], transform, setupFiles, testEnvironment: 'node' },
    {
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      transform,
      setupFiles,
      testEnvironment: 'node',
    },
    {
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/e2e/**/*.test.ts'],
      transform,
      setupFiles,
      testEnvironment: 'node',
    },
  ],
};
