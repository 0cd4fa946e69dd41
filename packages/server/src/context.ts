import type { Logger } from 'pino';
import type { RealtimeBus } from './bus/bus.ts';
import type { Clock } from './clock.ts';
import type { Config } from './config.ts';
import type { Metrics } from './http/metrics.ts';
import type { OperatorToken } from './modules/auth/operator.ts';
import type { TokenService } from './modules/auth/tokens.ts';
import type { CommandsService } from './modules/commands/service.ts';
import type { EventsService } from './modules/events/service.ts';
import type { SessionsService } from './modules/sessions/service.ts';
import type { StreamsService } from './modules/streams/service.ts';
import type { WebhooksService } from './modules/webhooks/index.ts';
import type { Outbox } from './outbox.ts';
import type { Signals } from './signals.ts';
import type { Storage } from './storage/index.ts';

/** What every module is given: the shared infrastructure of one server process. */
export interface AppContext {
  config: Config;
  storage: Storage;
  clock: Clock;
  logger: Logger;
  tokens: TokenService;
  operator: OperatorToken;
  /** Key of the keyed digests of client and campaign secrets. */
  digestKey: Buffer;
  metrics: Metrics;
  bus: RealtimeBus;
  signals: Signals;
  events: EventsService;
  sessions: SessionsService;
  streams: StreamsService;
  commands: CommandsService;
  /** Where modules write webhook messages, in the transaction of the fact they report. */
  outbox: Outbox;
  webhooks: WebhooksService;
}

/** Options every module plugin receives. */
export interface ModuleOptions {
  ctx: AppContext;
}
