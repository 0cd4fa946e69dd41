/** Human-readable output: aligned tables and key/value blocks. `--json` bypasses all of this. */

export function time(ms: number | null | undefined): string {
  return typeof ms === 'number' ? new Date(ms).toISOString() : '-';
}

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return `${[line(headers), ...rows.map(line)].join('\n')}\n`;
}

export function fields(entries: [string, string][]): string {
  const width = Math.max(...entries.map(([k]) => k.length));
  return `${entries.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n')}\n`;
}

export function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}
