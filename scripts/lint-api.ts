// `npm run lint:api`: the API description, checked by tools no one here wrote. Builds /openapi.json in
// this process (no server listens), writes it to node_modules/.cache/liveline/openapi.json, and runs
//   - Redocly CLI, `recommended` rules (redocly.yaml; accepted reports in .redocly.lint-ignore.yaml),
//   - Spectral with the OWASP API Security ruleset (.spectral.yaml).
// Any error or warning of either fails. docs/api.md, "The API description", says what the rulesets
// decide and why.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { openapiDocument } from '../packages/server/src/cli/openapi.ts';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '..');
const bin = (name: string) => path.join(root, 'node_modules', '.bin', name);
const file = path.join(root, 'node_modules', '.cache', 'liveline', 'openapi.json');

interface Finding {
  tool: string;
  severity: 'error' | 'warning';
  rule: string;
  where: string;
  message: string;
}

/** A linter's JSON report; it exits non-zero when it finds errors, which is not a failure to run. */
async function report(command: string, args: string[], env: Record<string, string> = {}) {
  try {
    const { stdout } = await run(command, args, {
      cwd: root,
      env: { ...process.env, ...env },
      maxBuffer: 64 * 1024 * 1024,
    });
    return stdout;
  } catch (err) {
    const stdout = (err as { stdout?: string }).stdout;
    if (stdout?.trim()) return stdout;
    throw err;
  }
}

async function redocly(): Promise<Finding[]> {
  const out = await report(
    bin('redocly'),
    ['lint', path.relative(root, file), '--config', 'redocly.yaml', '--format', 'json'],
    { REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
  );
  const { problems } = JSON.parse(out) as {
    problems: {
      ruleId: string;
      severity: string;
      message: string;
      location: { pointer: string }[];
    }[];
  };
  return problems.map((p) => ({
    tool: 'redocly',
    severity: p.severity === 'error' ? 'error' : 'warning',
    rule: p.ruleId,
    where: p.location[0]?.pointer ?? '',
    message: p.message,
  }));
}

async function spectral(): Promise<Finding[]> {
  const out = await report(bin('spectral'), [
    'lint',
    path.relative(root, file),
    '--ruleset',
    '.spectral.yaml',
    '--format',
    'json',
    '--quiet',
  ]);
  // With nothing to say Spectral may print no JSON at all.
  const results = (out.trim().startsWith('[') ? JSON.parse(out) : []) as {
    code: string;
    severity: number;
    message: string;
    path: string[];
  }[];
  return results
    .filter((r) => r.severity <= 1)
    .map((r) => ({
      tool: 'spectral',
      severity: r.severity === 0 ? 'error' : 'warning',
      rule: r.code,
      where: r.path.join('.'),
      message: r.message,
    }));
}

const started = Date.now();
fs.mkdirSync(path.dirname(file), { recursive: true });
const document = await openapiDocument();
fs.writeFileSync(file, `${JSON.stringify(document, null, 2)}\n`);
const operations = Object.values(document.paths as Record<string, object>).reduce(
  (n, item) => n + Object.keys(item).length,
  0,
);
const findings = (await Promise.all([redocly(), spectral()])).flat();
for (const f of findings)
  console.log(`${f.severity.padEnd(7)} ${f.tool}  ${f.rule}  ${f.where}\n        ${f.message}`);
const seconds = ((Date.now() - started) / 1000).toFixed(1);
if (findings.length > 0) {
  const errors = findings.filter((f) => f.severity === 'error').length;
  console.log(`lint:api: ${errors} errors, ${findings.length - errors} warnings (${seconds} s)`);
  process.exitCode = 1;
} else {
  console.log(
    `lint:api: /openapi.json (${operations} operations) passes Redocly and Spectral OWASP (${seconds} s)`,
  );
}
