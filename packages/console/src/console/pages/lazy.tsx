/**
 * A console page loaded when it is first opened (its own chunk of the build): the sign-in and the
 * live sessions — what every visit needs — load without the management pages' code.
 */
import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { asApiError } from '../../shared/problem.ts';
import { ErrorAlert } from '../../shared/ui.tsx';
import type { PageProps } from '../pages.tsx';

type Page = (props: PageProps) => JSX.Element;

export function lazyPage(title: string, load: () => Promise<Page>): Page {
  let loaded: Page | null = null;
  let loading: Promise<Page> | null = null;
  return function LazyPage(props: PageProps) {
    const [page, setPage] = useState<Page | null>(() => loaded);
    const [error, setError] = useState<unknown>(null);
    useEffect(() => {
      if (page) return;
      let cancelled = false;
      loading ??= load().then((p) => {
        loaded = p;
        return p;
      });
      loading.then(
        (p) => !cancelled && setPage(() => p),
        (err) => {
          loading = null; // a later visit tries again (a new deployment replaced the chunk, say)
          if (!cancelled) setError(asApiError(err));
        },
      );
      return () => {
        cancelled = true;
      };
    }, [page]);
    if (page) {
      const Loaded = page;
      return <Loaded {...props} />;
    }
    return (
      <section aria-labelledby="page-title">
        <h1 id="page-title">{title}</h1>
        {error ? <ErrorAlert error={error} title="This page did not load; reload to try again." /> : null}
        {!error ? <p aria-busy="true">Loading…</p> : null}
      </section>
    );
  };
}
