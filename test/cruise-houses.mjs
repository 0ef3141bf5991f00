/**
 * Cruises several small houses (folders of TypeScript files) with the layer rules in one process,
 * for test/unit/layers.test.ts: `node test/cruise-houses.mjs CONFIG DIR...` prints, as JSON, each
 * dir's violated rule names. One process loads dependency-cruiser and TypeScript once for every
 * house, where the CLI would load them again for each.
 */
import { readdirSync } from 'node:fs';
import { cruise } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

const [config, ...houses] = process.argv.slice(2);
const options = await extractDepcruiseOptions(config);
const found = {};
for (const dir of houses) {
  // The rules match paths relative to the house's root, as the CLI sees them from its working dir.
  process.chdir(dir);
  const folders = readdirSync('.', { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name);
  const { output } = await cruise(folders, options, undefined, { tsConfig: extractTSConfig('tsconfig.json') });
  found[dir] = output.summary.violations.map((v) => v.rule.name).sort();
}
console.log(JSON.stringify(found));
