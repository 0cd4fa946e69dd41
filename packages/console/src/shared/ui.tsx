import type { ComponentChildren } from 'preact';
import { ApiError } from './problem.ts';

/** A failure, as the problem's `detail` (and its field errors), announced to screen readers. */
export function ErrorAlert({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const e = error instanceof ApiError ? error : null;
  const detail = e ? e.detail : error instanceof Error ? error.message : String(error);
  return (
    <div class="alert" role="alert">
      {title ? <strong>{title} </strong> : null}
      {detail}
      {e && e.errors.length > 0 ? (
        <ul>
          {e.errors.map((f) => (
            <li key={f.path}>
              <code>{f.path}</code> {f.message}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

/** What to do when there is nothing to show yet. */
export function Empty({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <p class="empty-title">{title}</p>
      {children}
    </div>
  );
}

export function formatTime(ms: number | null | undefined): string {
  if (ms == null) return '—';
  return new Date(ms).toLocaleTimeString(undefined, { hour12: false });
}

export function formatDateTime(ms: number | null | undefined): string {
  if (ms == null) return '—';
  const d = new Date(ms);
  return `${d.toLocaleDateString()} ${d.toLocaleTimeString(undefined, { hour12: false })}`;
}

/** "12 s ago", "3 min ago", relative to `now`. */
export function ago(ms: number | null | undefined, now: number): string {
  if (ms == null) return '—';
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}
