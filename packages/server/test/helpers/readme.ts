// What the README walk-through tests share (readme.test.ts, readme-alert-challenge.test.ts): each runs a
// fenced bash block of README.md as a reader would and checks what it printed.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const README = path.resolve(import.meta.dirname, '../../../../README.md');
export const MARKER = '<!-- walkthrough -->';
export const REALTIME_MARKER = '<!-- walkthrough-realtime -->';
export const REWARDS_MARKER = '<!-- walkthrough-rewards -->';
export const COHORT_MARKER = '<!-- walkthrough-cohort -->';
export const WATCH_MARKER = '<!-- walkthrough-watch -->';
export const ALERT_MARKER = '<!-- walkthrough-alert -->';
export const ROOT = path.resolve(import.meta.dirname, '../../../..');
export const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

/** The fenced bash block right after the walk-through marker: the commands a reader copies. */
export function walkthrough(marker = MARKER): string {
  const readme = fs.readFileSync(README, 'utf8');
  const match = new RegExp(`${marker}\\s*\`\`\`bash\\n([\\s\\S]*?)\\n\`\`\`\\n`).exec(readme);
  if (!match) throw new Error(`README.md has no \`\`\`bash block after ${marker}`);
  return match[1];
}

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the script with bash in an empty directory, as a reader's second terminal would. */
export function runBash(script: string, env: Record<string, string>, inRepo = false): Promise<Run> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-readme-'));
  const file = path.join(dir, 'walkthrough.sh');
  fs.writeFileSync(file, script);
  return new Promise((resolve) => {
    execFile(
      'bash',
      [file],
      { cwd: inRepo ? ROOT : dir, env: { ...process.env, ...env }, timeout: 150_000 },
      (error, stdout, stderr) => {
        fs.rmSync(dir, { recursive: true, force: true });
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/** A TCP port nobody listens on right now (for the walk-through's receiver). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** The first string value printed for `"key": "..."` (jq pretty-prints objects one key per line). */
export function printed(out: string, key: string): string {
  const match = new RegExp(`"${key}":\\s*"([^"]+)"`).exec(out);
  if (!match) throw new Error(`the walk-through printed no ${key}:\n${out}`);
  return match[1];
}
