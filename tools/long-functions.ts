/**
 * Lists the functions of the product code longer than a limit (80 lines by default), longest
 * first: `npm run long-functions [-- --max N]`. Route tables (an express router's setup) are
 * listed too, marked, since they are long by nature (docs/development.md#long-functions).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const PRODUCT = ['api', 'workflows', 'activities', 'engines', 'db', 'domain', 'lib', 'workers', 'fixtures', 'cli', 'infra', 'tools'];

export interface LongFunction {
  file: string;
  name: string;
  line: number;
  lines: number;
}

function nameOf(node: ts.Node): string {
  if ((ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node)) && node.name) {
    const own = node.name.getText();
    const holder =
      ts.isMethodDeclaration(node) && ts.isClassDeclaration(node.parent) && node.parent.name ? `${node.parent.name.text}.` : '';
    return holder + own;
  }
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent)) return parent.name.getText();
  if (parent && ts.isPropertyAssignment(parent)) return parent.name.getText();
  if (parent && ts.isCallExpression(parent)) return `(callback of ${parent.expression.getText().slice(0, 40)})`;
  return '(anonymous)';
}

export function longFunctions(root: string, files: string[], max: number): LongFunction[] {
  const found: LongFunction[] = [];
  for (const file of files) {
    const text = readFileSync(path.join(root, file), 'utf8');
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
    const visit = (node: ts.Node) => {
      if (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isArrowFunction(node) || ts.isFunctionExpression(node)) {
        const start = source.getLineAndCharacterOfPosition(node.getStart()).line;
        const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        if (end - start + 1 > max) found.push({ file, name: nameOf(node), line: start + 1, lines: end - start + 1 });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found.sort((a, b) => b.lines - a.lines);
}

if (require.main === module) {
  const root = path.resolve(__dirname, '..');
  const maxArg = process.argv.indexOf('--max');
  const max = maxArg > 0 ? Number(process.argv[maxArg + 1]) : 80;
  const files = ts.sys
    .readDirectory(
      root,
      ['.ts'],
      ['node_modules', 'dist', '.data', 'test', 'bench'],
      PRODUCT.map((d) => `${d}/**/*`),
    )
    .map((f) => path.relative(root, f))
    .filter((f) => !f.endsWith('.d.ts'));
  const list = longFunctions(root, files, max);
  for (const f of list) console.log(`${String(f.lines).padStart(4)}  ${f.file}:${f.line}  ${f.name}`);
  console.log(`${list.length} functions over ${max} lines`);
}
