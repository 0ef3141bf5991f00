/**
 * The house's layers (docs/development.md#layers): arrows point down, never up or sideways.
 *   workers → api → workflows → activities → engines → db → domain → lib
 * workers/ are composition roots and may wire anything; cli/, infra/, bench/, tools/ and test/
 * are programs and tests on top. Each rule below is one forbidden arrow; `npm run layers` prints
 * the folder graph, and test/unit/layers.test.ts shows every rule firing.
 */
const layer = (name) => `^${name}/`;
const any = (...names) => `^(${names.join('|')})/`;

/** Each layer with the layers it must not import (everything above it, and its own siblings). */
const forbidden = [
  [
    'lib',
    any('domain', 'db', 'engines', 'activities', 'workflows', 'api', 'workers', 'fixtures'),
    'lib/ holds leaf helpers: it imports nothing of Kiln outside lib/.',
  ],
  [
    'domain',
    any('db', 'engines', 'activities', 'workflows', 'api', 'workers', 'fixtures'),
    'domain/ is pure data and rules: it imports only lib/.',
  ],
  [
    'db',
    any('engines', 'activities', 'workflows', 'api', 'workers', 'fixtures'),
    'db/ stores the domain: it imports domain/ and lib/ only.',
  ],
  [
    'engines',
    any('db', 'activities', 'workflows', 'api', 'workers'),
    'engines/ run models: they import domain/ and lib/ only, and throw EngineError.',
  ],
  [
    'fixtures',
    any('db', 'activities', 'workflows', 'api', 'workers'),
    'fixtures/ are test engines: they import engines/, domain/ and lib/ only.',
  ],
  [
    'activities',
    any('workflows', 'api', 'workers'),
    'activities/ import engines/, db/, domain/ and lib/, never the layers that call them.',
  ],
  [
    'workflows',
    any('api', 'workers', 'db', 'engines', 'lib', 'fixtures'),
    'workflows/ are deterministic: they import domain/, and activities by type only.',
  ],
  [
    'api',
    any('workers', 'activities', 'engines', 'fixtures/echo-engine'),
    'api/ starts and reads workflows; engines and activities run on the workers.',
  ],
];

module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      comment: 'Files that import each other in a loop, type-only imports included: break the loop by moving what both need down a layer.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...forbidden.map(([from, to, comment]) => ({
      name: `${from}-points-down`,
      comment,
      severity: 'error',
      from: { path: layer(from) },
      to: { path: to },
    })),
    {
      name: 'workflows-import-activities-by-type',
      comment: 'Workflow code runs in a sandbox replayed from history: activities are imported with `import type` only.',
      severity: 'error',
      from: { path: layer('workflows') },
      to: { path: layer('activities'), dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'api-imports-workflows-by-type',
      comment: 'The API starts workflows by name through the client: it imports their types only.',
      severity: 'error',
      from: { path: layer('api') },
      to: { path: layer('workflows'), dependencyTypesNot: ['type-only'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist|\\.data)/' },
    includeOnly: { path: '^(api|workflows|activities|engines|db|domain|lib|workers|fixtures)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.json'] },
  },
};
