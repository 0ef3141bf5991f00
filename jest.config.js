/** Three tiers: unit tests run anywhere; integration and e2e talk to the real stack, in band. */
// swc strips the types file by file (the type check is tsc's, in npm test's checks), for less CPU
// than ts-jest (docs/development.md#libraries-and-why-each-is-there). Dynamic import() stays one,
// for the ESM-only packages (node-llama-cpp).
const swc = {
  jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
  module: { type: 'commonjs', ignoreDynamic: true },
  sourceMaps: 'inline',
};
const transform = { '^.+\\.ts$': ['@swc/jest', swc] };
// One transform cache for every lane (infra/test.sh gives each lane its own TMPDIR, where jest's
// default cache would be cold in every lane and removed with it) and for the next run.
const cacheDirectory = require('node:path').join(__dirname, '.data', 'jest-cache');
// Fixtures are on for the suite's own run, in the test processes as in the stack's.
const setupFiles = ['<rootDir>/test/enable-fixtures.ts'];
// Tests of the stack start each file without the last file's idle HTTP connections (see the file).
const stackEnvironment = '<rootDir>/test/fresh-connections-environment.js';
// What every tier shares.
const common = { transform, setupFiles, cacheDirectory };
module.exports = {
  projects: [
    { displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'], ...common, testEnvironment: 'node' },
    { displayName: 'integration', testMatch: ['<rootDir>/test/integration/**/*.test.ts'], ...common, testEnvironment: stackEnvironment },
    { displayName: 'e2e', testMatch: ['<rootDir>/test/e2e/**/*.test.ts'], ...common, testEnvironment: stackEnvironment },
  ],
};
