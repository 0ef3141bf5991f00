/**
 * docs/configuration.md is rendered from the configuration schema (tools/config-doc.ts): it fails
 * here when the page in the tree is not what the schema renders today. Fix with
 * `npm run docs:config`.
 */
import { configSchema } from '../../lib/config';
import {
  type ConfigKey,
  computedDefaults,
  configGroupOrder,
  configGroups,
  readConfigDoc,
  renderConfigDoc,
  scriptVariables,
} from '../../tools/config-doc';

const keys = Object.keys(configSchema.shape) as ConfigKey[];

test('docs/configuration.md is what the schema renders (run `npm run docs:config`)', () => {
  const committed = readConfigDoc();
  expect(committed).toBeDefined();
  // One assertion on the whole page: jest's diff shows the lines that moved.
  expect(committed).toBe(renderConfigDoc());
});

test('every variable of the schema has a description and a known group', () => {
  const groups = new Set<string>(configGroupOrder.map((g) => g.name));
  for (const key of keys) {
    expect({ key, described: Boolean(configSchema.shape[key].description) }).toEqual({ key, described: true });
    expect(groups.has(configGroups[key])).toBe(true);
  }
  expect(Object.keys(configGroups).sort()).toEqual([...keys].sort());
});

test('the page lists each variable once, in the schema tables or the scripts table', () => {
  const page = renderConfigDoc();
  const scriptNames = scriptVariables.flatMap((v) => v.names);
  for (const name of [...keys, ...scriptNames]) {
    expect({
      name,
      rows: page
        .split('\n')
        .filter((line) => line.startsWith('|') && line.includes(`\`${name}\``) && line.split('|')[1].includes(`\`${name}\``)).length,
    }).toEqual({ name, rows: 1 });
  }
  // A variable the processes parse is documented by the schema, not by hand.
  expect(scriptNames.filter((name) => (keys as string[]).includes(name))).toEqual([]);
});

test('defaults computed from the machine are stated in words, for schema keys that have a default', () => {
  for (const key of Object.keys(computedDefaults) as ConfigKey[]) {
    expect(keys).toContain(key);
    expect(configSchema.shape[key].def.type).toBe('default');
  }
});
