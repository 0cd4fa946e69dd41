export { webhooksRoutes } from './routes.ts';
export { WebhooksService } from './service.ts';
