import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { tenantOf } from '../../http/auth.ts';
import { listRoutes } from '../../http/list-routes.ts';
import { problemResponses, Uuid } from '../../http/schemas.ts';
import { AlertSchema, CreateAlertBody, IncidentSchema, IncidentStatus, UpdateAlertBody } from './schemas.ts';
import type { AlertsService } from './service.ts';

export interface AlertsPluginOptions {
  alerts: AlertsService;
}

const config = { auth: { tenant: 'webhooks:manage' as const } };
const tags = ['alerts'];
const params = Type.Object({ alertId: Uuid }, { additionalProperties: false });
const alertIdOf = (request: FastifyRequest) => (request.params as { alertId: string }).alertId;

/** Alert rules (CONTRACT §13): the tenant's own, scope `webhooks:manage`. */
export const alertsPlugin: FastifyPluginAsync<AlertsPluginOptions> = async (app, { alerts }) => {
  app.addSchema(AlertSchema);
  app.addSchema(IncidentSchema);
  registerAlertRoutes(app, alerts);
  registerAlertChangeRoutes(app, alerts);
  registerIncidentRoutes(app, alerts);
};

function registerAlertRoutes(root: FastifyInstance, alerts: AlertsService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    '/alerts',
    {
      config,
      schema: {
        tags,
        operationId: 'createAlert',
        summary: 'Create an alert rule: `alert.triggered` / `alert.resolved` webhooks per session.',
        body: CreateAlertBody,
        response: { 201: Type.Ref('Alert'), ...problemResponses(400, 401, 403, 409, 415, 429) },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await alerts.create(tenantOf(request).tenantId, request.body)),
  );
  listRoutes(app, {
    url: '/alerts',
    operationId: 'listAlerts',
    key: 'alerts',
    item: Type.Ref('Alert'),
    tags,
    summary: 'List alert rules, oldest first',
    config,
    list: (request, page) => alerts.list(tenantOf(request).tenantId, page),
  });
  app.get(
    '/alerts/:alertId',
    {
      config,
      schema: {
        tags,
        operationId: 'getAlert',
        summary: 'One alert rule.',
        params,
        response: { 200: Type.Ref('Alert'), ...problemResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => alerts.get(tenantOf(request).tenantId, alertIdOf(request)),
  );
}

function registerAlertChangeRoutes(root: FastifyInstance, alerts: AlertsService) {
  const app = root.withTypeProvider<TypeBoxTypeProvider>();
  app.patch(
    '/alerts/:alertId',
    {
      config,
      schema: {
        tags,
        operationId: 'updateAlert',
        summary: 'Change an alert rule (`tenantCohortId: null` watches every cohort).',
        description:
          'A changed condition starts every session’s run anew; open incidents stay open until the new condition resolves them or their session ends.',
        params,
        body: UpdateAlertBody,
        response: { 200: Type.Ref('Alert'), ...problemResponses(400, 401, 403, 404, 415, 429) },
      },
    },
    async (request) => alerts.update(tenantOf(request).tenantId, alertIdOf(request), request.body),
  );
  app.delete(
    '/alerts/:alertId',
    {
      config,
      schema: {
        tags,
        operationId: 'deleteAlert',
        summary: 'Delete an alert rule with its incidents (open ones end without a message).',
        params,
        response: {
          204: Type.Null({ description: 'Deleted.' }),
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request, reply) => {
      await alerts.remove(tenantOf(request).tenantId, alertIdOf(request));
      return reply.code(204).send(null);
    },
  );
}

function registerIncidentRoutes(root: FastifyInstance, alerts: AlertsService) {
  listRoutes(root, {
    url: '/alerts/:alertId/incidents',
    operationId: 'listAlertIncidents',
    key: 'incidents',
    item: Type.Ref('AlertIncident'),
    tags,
    summary: 'Incidents of an alert rule, newest first',
    config,
    params: { alertId: Uuid },
    query: { status: Type.Optional(IncidentStatus) },
    errors: [400, 401, 403, 404, 429],
    list: (request, page) => {
      const { status } = request.query as { status?: 'open' | 'resolved' };
      return alerts.incidents(tenantOf(request).tenantId, alertIdOf(request), status, page);
    },
  });
}
