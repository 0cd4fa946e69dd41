/**
 * Small pieces shared by the console's management pages (campaigns, webhooks, credentials): an action
 * runner that shows the problem's detail, a secret shown once, a two-step confirmation, dates for
 * `datetime-local` fields, and files read in the browser.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { asApiError } from '../../shared/problem.ts';
import { ErrorAlert } from '../../shared/ui.tsx';
import './admin.css';

/**
 * Runs one action at a time: `busy` while it runs, its failure as an `ApiError` (shown with
 * `<Outcome>`), and a sentence saying what it did.
 */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [status, setStatus] = useState('');
  const mounted = useRef(true);
  useEffect(
    () => () => {
      mounted.current = false;
    },
    [],
  );
  /** Runs `work`; its string answer becomes the status. Resolves true when it succeeded. */
  const run = async (work: () => Promise<string | undefined>): Promise<boolean> => {
    setBusy(true);
    setError(null);
    setStatus('');
    try {
      const said = await work();
      if (mounted.current) setStatus(typeof said === 'string' ? said : '');
      return true;
    } catch (err) {
      if (mounted.current) setError(asApiError(err));
      return false;
    } finally {
      if (mounted.current) setBusy(false);
    }
  };
  const clear = () => {
    setError(null);
    setStatus('');
  };
  return { busy, error, status, run, clear };
}

/** What an action did: the problem's detail in an alert, or its status sentence. */
export function Outcome({ error, status }: { error: unknown; status: string }) {
  return (
    <>
      <ErrorAlert error={error} />
      <p class="sent" role="status">
        {status}
      </p>
    </>
  );
}

/**
 * A secret the server shows only once (client, campaign and webhook secrets): in a read-only field
 * to copy, until the person says it is stored.
 */
export function OneTimeSecret({
  label,
  value,
  children,
  onDone,
}: {
  label: string;
  value: string;
  children?: ComponentChildren;
  onDone: () => void;
}) {
  const [copied, setCopied] = useState(false);
  const field = useRef<HTMLInputElement>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied(true);
    } catch {
      // No clipboard (a page not served over https or from localhost): select it for Ctrl+C.
      field.current?.select();
    }
  };
  return (
    <div class="secret-once">
      <p class="empty-title">Copy it now: it is shown only this once.</p>
      <label>
        {label}
        <input
          ref={field}
          readOnly
          value={value}
          spellcheck={false}
          onFocus={() => field.current?.select()}
        />
      </label>
      {children}
      <div class="row buttons">
        <button type="button" class="secondary" onClick={copy}>
          {copied ? 'Copied' : 'Copy'}
        </button>
        <button type="button" onClick={onDone}>
          I have stored it
        </button>
      </div>
    </div>
  );
}

/**
 * A destructive action in two steps: the first button asks, the second (named `confirmLabel`) does
 * it. No browser dialog: it works with keyboards, screen readers and scripted browsers alike.
 */
export function ConfirmButton({
  label,
  confirmLabel,
  question,
  disabled,
  onConfirm,
}: {
  label: string;
  confirmLabel: string;
  question: string;
  disabled?: boolean;
  onConfirm: () => unknown;
}) {
  const [asking, setAsking] = useState(false);
  const confirm = useRef<HTMLButtonElement>(null);
  // The first button goes away: the keyboard's focus moves to the one that confirms.
  useEffect(() => {
    if (asking) confirm.current?.focus();
  }, [asking]);
  if (!asking) {
    return (
      <button type="button" class="secondary danger" disabled={disabled} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  }
  return (
    <span class="confirm">
      <span>{question}</span>
      <button
        ref={confirm}
        type="button"
        class="danger-solid"
        disabled={disabled}
        onClick={async () => {
          setAsking(false);
          await onConfirm();
        }}
      >
        {confirmLabel}
      </button>
      <button type="button" class="secondary" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

/**
 * A table's scrolling frame: a named region that takes the keyboard's focus, so a table wider than
 * its column can be scrolled without a mouse (axe: scrollable-region-focusable).
 */
export function TableWrap({ labelledBy, children }: { labelledBy: string; children: ComponentChildren }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard
    <section class="table-wrap" aria-labelledby={labelledBy} tabIndex={0}>
      {children}
    </section>
  );
}

/** A page's heading with the link back to its list. */
export function BackLink({ href, children }: { href: string; children: ComponentChildren }) {
  return (
    <p>
      <a href={href}>← {children}</a>
    </p>
  );
}

/** Unix ms → the value of a `datetime-local` field (the browser's time zone); '' for null. */
export function toLocalInput(ms: number | null | undefined): string {
  if (ms == null) return '';
  const d = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A `datetime-local` value (the browser's time zone) → Unix ms; null when empty. */
export function fromLocalInput(value: string): number | null {
  if (value.trim() === '') return null;
  const ms = new Date(value).getTime();
  if (Number.isNaN(ms)) throw new Error(`“${value}” is not a date and time.`);
  return ms;
}

/** A file's bytes as standard base64 (what the JSON challenge routes take for `rewardImage`). */
export async function fileToBase64(file: Blob): Promise<string> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  let binary = '';
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) {
    binary += String.fromCharCode(...bytes.subarray(i, i + chunk));
  }
  return btoa(binary);
}

/** The first file chosen in a file field, or null. */
export function chosenFile(form: HTMLFormElement, name: string): File | null {
  const input = form.elements.namedItem(name);
  const file = input instanceof HTMLInputElement ? input.files?.[0] : undefined;
  return file ?? null;
}

/** "3 of 40 shown" when a list was cut at a page. */
export function shownOf(shown: number, total: number, noun: string): string {
  return shown < total ? `The first ${shown} of ${total} ${noun} are shown.` : '';
}
