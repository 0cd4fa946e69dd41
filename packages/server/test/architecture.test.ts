import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// The rules of docs/architecture.md that the code's own text can show: modules meet only through
// each other's face (`modules/<m>/index.ts`), and route files stay thin.

const SRC = path.resolve(import.meta.dirname, '../src');
const MODULES = path.join(SRC, 'modules');
const MAX_ROUTE_FUNCTION_LINES = 60;

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [full] : [];
  });
}

const files = sourceFiles(SRC);
const parsed = new Map(
  files.map((file) => [
    file,
    ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true),
  ]),
);
const rel = (file: string) => path.relative(SRC, file);

/** `auth` for src/modules/auth/…, null outside the modules. */
function moduleOf(file: string): string | null {
  const r = path.relative(MODULES, file);
  return r.startsWith('..') ? null : r.split(path.sep)[0];
}

function importsOf(source: ts.SourceFile): string[] {
  const specifiers: string[] = [];
  for (const statement of source.statements) {
    if (
      (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) &&
      statement.moduleSpecifier &&
      ts.isStringLiteral(statement.moduleSpecifier)
    ) {
      specifiers.push(statement.moduleSpecifier.text);
    }
  }
  return specifiers;
}

describe('architecture', () => {
  it('every module has a face: modules/<m>/index.ts', () => {
    const modules = fs.readdirSync(MODULES, { withFileTypes: true }).filter((e) => e.isDirectory());
    const faceless = modules.filter((m) => !fs.existsSync(path.join(MODULES, m.name, 'index.ts')));
    expect(faceless.map((m) => m.name)).toEqual([]);
  });

  it("no code imports another module's internals, only its index.ts", () => {
    const violations: string[] = [];
    for (const [file, source] of parsed) {
      for (const specifier of importsOf(source)) {
        if (!specifier.startsWith('.')) continue;
        const target = path.resolve(path.dirname(file), specifier);
        const targetModule = moduleOf(target);
        if (targetModule === null || targetModule === moduleOf(file)) continue;
        if (target !== path.join(MODULES, targetModule, 'index.ts')) {
          violations.push(`${rel(file)} imports ${rel(target)}`);
        }
      }
    }
    expect(violations).toEqual([]);
  });

  it(`no function in a route file is longer than ${MAX_ROUTE_FUNCTION_LINES} lines`, () => {
    const long: string[] = [];
    for (const [file, source] of parsed) {
      const r = rel(file);
      if (!/(^|\/)routes(\/|[^/]*\.ts$)/.test(r)) continue;
      const visit = (node: ts.Node) => {
        if (ts.isFunctionLike(node) && 'body' in node && node.body) {
          const start = source.getLineAndCharacterOfPosition(node.getStart()).line;
          const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
          if (end - start + 1 > MAX_ROUTE_FUNCTION_LINES)
            long.push(`${r}:${start + 1} (${end - start + 1} lines)`);
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    expect(long).toEqual([]);
  });
});
