export { loadServerKeys } from './keys.ts';
export { type OperatorToken, resolveOperatorToken } from './operator.ts';
export { authRoutes } from './routes.ts';
export { findTenant } from './store.ts';
export type { DevicePrincipal, Principal, TenantPrincipal } from './tokens.ts';
export { TokenService } from './tokens.ts';
