import fs from 'node:fs';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { problems } from './problem.ts';

/**
 * The web pages (CONTRACT §10): the console at `/console` and the players' viewer at `/viewer`, built
 * by `@liveline/console` (Vite) into `packages/console/dist`: `<page>/index.html` and the shared,
 * fingerprinted `assets/`. `npm install` builds them (and `npm start` when they are missing).
 */
export const CONSOLE_DIST = path.resolve(import.meta.dirname, '../../../console/dist');

export const PAGES = ['console', 'viewer'] as const;

/**
 * Only the page's own scripts, styles and API: no inline script, no other origin, no framing.
 * Images may be blobs (the viewer fetches challenge images with the device token).
 */
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob: data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

function pageHeaders(reply: FastifyReply) {
  reply.header('Content-Security-Policy', PAGE_CSP);
  // The viewer's links lead to reward sites: they learn nothing of where the player came from.
  reply.header('Referrer-Policy', 'no-referrer');
}

export interface PagesPluginOptions {
  /** Where the built pages are (default: the console package's `dist`). */
  dist?: string;
}

/** Serves the built pages; an unbuilt checkout answers 503 with the command that builds them. */
export async function pagesPlugin(app: FastifyInstance, options: PagesPluginOptions) {
  const dist = options.dist ?? CONSOLE_DIST;
  const assets = path.join(dist, 'assets');

  for (const page of PAGES) {
    const file = path.join(dist, page, 'index.html');
    app.get(`/${page}`, { schema: { hide: true } }, async (_request, reply) => {
      let html: Buffer;
      try {
        // Read on each request (a few hundred bytes): a rebuild shows without a restart.
        html = await fs.promises.readFile(file);
      } catch {
        throw problems.unavailable(
          `The ${page} page is not built. Run \`npm run build -w @liveline/console\` (npm install and npm start do it).`,
        );
      }
      pageHeaders(reply);
      // The page names its fingerprinted assets: always ask again for the page itself.
      reply.header('Cache-Control', 'no-cache');
      return reply.type('text/html; charset=utf-8').send(html);
    });
  }

  // The fingerprinted scripts and styles never change under a name: cached for a year. Files are
  // looked up per request (wildcard), so a build made after the start is served too.
  await app.register(fastifyStatic, {
    root: assets,
    prefix: '/assets/',
    decorateReply: false,
    index: false,
    wildcard: true,
    immutable: true,
    maxAge: '365d',
    // The build writes .br and .gz beside each file: sent when the browser accepts them.
    preCompressed: true,
    suppressWarning: true,
  });
}
