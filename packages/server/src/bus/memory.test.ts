import { randomUUID } from 'node:crypto';
import { busContract, presenceContract } from '../../test/contracts/bus.contract.ts';
import { MemoryBus } from './memory-bus.ts';
import { MemoryPresence } from './memory-presence.ts';

busContract('memory', async () => {
  const bus = new MemoryBus();
  return { nodes: [bus], close: () => bus.close() };
});

presenceContract('memory', async () => {
  const presence = new MemoryPresence(randomUUID());
  return { nodes: [presence], close: () => presence.close() };
});
