/**
 * The console's pages, in the order of its navigation. A page is a component that gets the API and
 * the rest of its route (`#/<id>/<path…>`). To add one: write `src/console/pages/<name>.tsx` exporting
 * a component of `PageProps`, and add its entry below.
 */
import type { JSX } from 'preact';
import type { Api } from './auth.ts';
import { lazyPage } from './pages/lazy.tsx';
import { SessionsPage } from './pages/sessions.tsx';

export interface PageProps {
  api: Api;
  /** The route below the page: `#/sessions/<id>` gives `['<id>']`. */
  path: string[];
}

export interface ConsolePage {
  id: string;
  title: string;
  component: (props: PageProps) => JSX.Element;
}

export const PAGES: ConsolePage[] = [
  { id: 'sessions', title: 'Sessions', component: SessionsPage },
  // Loaded when first opened: their code stays out of what the sign-in and the sessions load.
  {
    id: 'cohort',
    title: 'Send to cohort',
    component: lazyPage('Send to cohort', () => import('./pages/cohort.tsx').then((m) => m.CohortPage)),
  },
  {
    id: 'alerts',
    title: 'Alerts',
    component: lazyPage('Alerts', () => import('./pages/alerts.tsx').then((m) => m.AlertsPage)),
  },
  {
    id: 'campaigns',
    title: 'Campaigns',
    component: lazyPage('Campaigns', () => import('./pages/campaigns.tsx').then((m) => m.CampaignsPage)),
  },
  {
    id: 'webhooks',
    title: 'Webhooks',
    component: lazyPage('Webhooks', () => import('./pages/webhooks.tsx').then((m) => m.WebhooksPage)),
  },
  {
    id: 'credentials',
    title: 'Credentials',
    component: lazyPage('Credentials', () =>
      import('./pages/credentials.tsx').then((m) => m.CredentialsPage),
    ),
  },
];
