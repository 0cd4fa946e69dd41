import { useEffect, useState } from 'preact/hooks';
import { type Api, apiFromStoredAuth, loadAuth, signOut } from './auth.ts';
import { PAGES } from './pages.tsx';
import { SignIn } from './signin.tsx';

/** `#/sessions/<id>` → `['sessions', '<id>']`. */
function parseRoute(hash: string): string[] {
  return hash
    .replace(/^#\/?/, '')
    .split('/')
    .filter((p) => p !== '')
    .map((p) => decodeURIComponent(p));
}

function useRoute(): string[] {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

export function App() {
  const [api, setApi] = useState<Api | null>(() => {
    const stored = loadAuth();
    return stored ? apiFromStoredAuth(stored) : null;
  });
  const [notice, setNotice] = useState<string | undefined>();
  const route = useRoute();

  // A stored token that has expired (or was revoked) cannot be refreshed: back to the sign-in.
  useEffect(() => {
    if (!api || api.tenant.tokens) return;
    const expired = () => {
      void signOut(api);
      setNotice('Your sign-in has expired. Sign in again.');
      setApi(null);
    };
    const watch = {
      onResponse({ response }: { response: Response }) {
        if (response.status === 401) expired();
        return response;
      },
    };
    api.tenant.use(watch);
    const timer = setTimeout(expired, Math.max(0, api.auth.expiresAt - Date.now()));
    return () => {
      clearTimeout(timer);
      api.tenant.eject(watch);
    };
  }, [api]);

  if (!api) {
    return (
      <SignIn
        notice={notice}
        onSignedIn={(next) => {
          setNotice(undefined);
          setApi(next);
        }}
      />
    );
  }

  const page = PAGES.find((p) => p.id === route[0]) ?? PAGES[0];
  const Page = page.component;
  return (
    <>
      <header class="topbar">
        <span class="brand">liveline</span>
        <nav aria-label="Console">
          <ul>
            {PAGES.map((p) => (
              <li key={p.id}>
                <a href={`#/${p.id}`} aria-current={p === page ? 'page' : undefined}>
                  {p.title}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span class="who">
          {api.auth.mode === 'operator' ? 'Operator · ' : ''}
          {api.auth.label}
        </span>
        <button
          type="button"
          class="secondary"
          onClick={() => {
            void signOut(api);
            setApi(null);
          }}
        >
          Sign out
        </button>
      </header>
      <main>
        <Page api={api} path={page.id === route[0] ? route.slice(1) : []} />
      </main>
    </>
  );
}
