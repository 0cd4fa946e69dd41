import { fileURLToPath } from 'node:url';
import preact from '@preact/preset-vite';
import { defineConfig, type Plugin } from 'vite';

/** Modules whose top-level code only defines things (no registration, no globals). */
const PURE =
  /[\\/](packages[\\/](protocol|client|tenant)[\\/]src|node_modules[\\/](typebox|standardwebhooks|fast-sha256|@stablelib))[\\/]/;

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

/** Where `npm run dev` sends API calls: a liveline server started with `npm start`. */
const target = process.env.LIVELINE_URL ?? `http://127.0.0.1:${process.env.PORT ?? 8080}`;

/** `npm run dev`: /console and /viewer as the server has them (Vite serves each page at its folder). */
const pagePaths: Plugin = {
  name: 'liveline-page-paths',
  configureServer(server) {
    server.middlewares.use((req, res, next) => {
      const [pathname, query] = (req.url ?? '').split('?');
      if (pathname !== '/console' && pathname !== '/viewer') return next();
      res.statusCode = 302;
      res.setHeader('Location', `${pathname}/${query ? `?${query}` : ''}`);
      res.end();
    });
  },
};

export default defineConfig({
  plugins: [preact(), pagePaths],
  // Two pages, one build: dist/console/index.html and dist/viewer/index.html share dist/assets/.
  base: '/',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // Small, fingerprinted files; no source maps are shipped with the server.
    sourcemap: false,
    rolldownOptions: {
      input: { console: here('./console/index.html'), viewer: here('./viewer/index.html') },
      treeshake: {
        // The workspace packages build TypeBox schemas and validators at module level, and
        // @liveline/tenant's index brings webhook verification: pure code the pages never call.
        // Declared free of side effects, what the pages do not import stays out of the bundle.
        moduleSideEffects: (id: string) => !PURE.test(id),
      },
    },
  },
  server: {
    // `npm run dev`: open http://localhost:5173/console — every other path goes to the server.
    proxy: {
      '^/(?!console|viewer|src/|@|node_modules/|__)': { target, changeOrigin: false, ws: true },
    },
  },
});
