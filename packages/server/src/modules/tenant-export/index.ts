// The face of the tenant-export module: everything outside it imports from here only.
export { type TenantExportPluginOptions, tenantExportPlugin } from './routes.ts';
export { EXPORT_SESSION_PAGE, type ExportSummary, TenantExport, type TenantExportDeps } from './service.ts';
