import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Bus, BusMessage, Presence } from '../../src/bus/index.ts';

/**
 * The behaviour every bus and every presence implementation must have, written once and run against
 * each (ARCHITECTURE: one contract suite for every bus). A factory returns the nodes of one
 * deployment: one for the in-memory implementations, several for the ones that join processes.
 */
export interface Deployment<T> {
  nodes: T[];
  close(): Promise<void>;
  /**
   * For implementations that join processes: node `i` dies without a word (no release, no
   * goodbye), as a process does under SIGKILL; `leaseMs` is how long its claims may outlive it.
   */
  kill?: { node(i: number): Promise<void>; leaseMs: number };
}

/** Resolves when `check` holds, polling; a cross-process bus delivers asynchronously. */
async function eventually(check: () => boolean, timeoutMs = 2000) {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const close = (sessionId: string, n: number): BusMessage => ({
  type: 'close',
  sessionId,
  code: 4009,
  reason: `m${n}`,
});

/** Every message each node's handler gets (after `delayMs`, when given: an async handler). */
function record(nodes: Bus[], delayMs = 0): BusMessage[][] {
  return nodes.map((node) => {
    const got: BusMessage[] = [];
    node.subscribe(async (m) => {
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      got.push(m);
    });
    return got;
  });
}

/**
 * Publishes a marker from `node` and waits until every node has it: whatever was sent before it has
 * arrived by then (a node's messages travel in order), so what has not arrived will not.
 */
async function publishMarker(node: Bus, received: BusMessage[][]): Promise<BusMessage> {
  const sessionId = randomUUID();
  const marker = close(sessionId, 999);
  await node.publish(marker);
  const heard = (got: BusMessage[]) => got.some((m) => m.type === 'close' && m.sessionId === sessionId);
  await eventually(() => received.every(heard));
  return marker;
}

export function busContract(name: string, deploy: () => Promise<Deployment<Bus>>) {
  describe(`bus contract: ${name}`, () => {
    let deployment: Deployment<Bus>;
    afterEach(async () => deployment?.close());

    it('gives every node its own id', async () => {
      deployment = await deploy();
      const ids = deployment.nodes.map((n) => n.nodeId);
      expect(new Set(ids).size).toBe(ids.length);
      for (const id of ids) expect(id).toMatch(/\S/);
    });

    it("runs the publishing node's handlers before publish resolves", async () => {
      deployment = await deploy();
      for (const node of deployment.nodes) {
        const seen: BusMessage[] = [];
        node.subscribe(async (m) => {
          await new Promise((r) => setTimeout(r, 5));
          seen.push(m);
        });
        const message = close(randomUUID(), 1);
        await node.publish(message);
        expect(seen).toContainEqual(message);
      }
    });

    it("runs the publishing node's handlers in the order they were added, each after the last has finished", async () => {
      deployment = await deploy();
      const node = deployment.nodes[0];
      const steps: string[] = [];
      node.subscribe(() => {
        steps.push('sync 1');
      });
      node.subscribe(async () => {
        steps.push('async start');
        await new Promise((r) => setTimeout(r, 5));
        steps.push('async end');
      });
      // A handler that returns nothing for a message it ignores, as most do.
      node.subscribe((m) => (m.type === 'takeover' ? Promise.resolve() : undefined));
      node.subscribe(() => {
        steps.push('sync 2');
      });
      await node.publish(close(randomUUID(), 1));
      expect(steps).toEqual(['sync 1', 'async start', 'async end', 'sync 2']);
    });

    // The order guaranteed is each publisher's own (as Redis pub/sub and socket.io's adapters give):
    // a node's messages reach every node in the order it published them. Across publishers there is
    // no total order; commands stay in order across processes because the accepting process waits
    // for the holder's `delivered` before it answers (commands/delivery.ts).
    it("brings every message to every node and handler, each node's messages in its publish order", async () => {
      deployment = await deploy();
      const nodes = deployment.nodes;
      const received = nodes.map(() => [[], []] as BusMessage[][]);
      nodes.forEach((node, i) => {
        node.subscribe((m) => void received[i][0].push(m));
        node.subscribe((m) => void received[i][1].push(m));
      });
      const sessionId = randomUUID();
      const sent: BusMessage[][] = nodes.map(() => []);
      // Interleaved, concurrent publishers.
      await Promise.all(
        nodes.map(async (node, i) => {
          for (let n = 0; n < 30; n++) {
            const message = close(sessionId, i * 1000 + n);
            sent[i].push(message);
            await node.publish(message);
          }
        }),
      );
      const total = sent.flat().length;
      await eventually(() => received.every((handlers) => handlers.every((h) => h.length === total)));
      for (const handlers of received) {
        for (const got of handlers) {
          expect(got).toHaveLength(total);
          sent.forEach((fromNode, i) => {
            const reason = (m: BusMessage) => (m.type === 'close' ? m.reason : '');
            const mine = got.filter((m) => fromNode.some((s) => reason(s) === reason(m)));
            expect(mine, `messages of node ${i}`).toEqual(fromNode);
          });
        }
      }
    });

    it('carries every message type whole', async () => {
      deployment = await deploy();
      const [first, last] = [deployment.nodes[0], deployment.nodes[deployment.nodes.length - 1]];
      const got: BusMessage[] = [];
      last.subscribe((m) => void got.push(m));
      const sessionId = randomUUID();
      const messages: BusMessage[] = [
        {
          type: 'command',
          sessionId,
          origin: first.nodeId,
          command: { commandId: randomUUID(), name: 'text', data: 'héllo ✓', issuedAt: 1_700_000_000_000 },
        },
        { type: 'delivered', sessionId, origin: first.nodeId, commandIds: [randomUUID(), randomUUID()] },
        { type: 'delivered', origin: first.nodeId, commandIds: [randomUUID()], at: 1_700_000_000_002 },
        {
          type: 'commands',
          origin: first.nodeId,
          commands: [
            [sessionId, { commandId: randomUUID(), name: 'text', data: 'a', issuedAt: 1_700_000_000_003 }],
            [randomUUID(), { commandId: randomUUID(), name: 'camera', data: { zoom: 2 }, issuedAt: 1 }],
          ],
        },
        {
          type: 'commands.accepted',
          origin: first.nodeId,
          commands: [[sessionId, randomUUID(), 1_700_000_060_000]],
        },
        { type: 'takeover', sessionId, connectionId: randomUUID() },
        { type: 'close', sessionId, code: 4001, reason: 'replaced' },
        { type: 'alerts.changed', tenantId: randomUUID(), origin: first.nodeId },
        {
          type: 'presence',
          presence: {
            kind: 'device.connected',
            tenantId: randomUUID(),
            sessionId,
            playerId: 'joueur-é',
            tenantCohortId: null,
            at: 1_700_000_000_001,
          },
        },
      ];
      for (const m of messages) await first.publish(m);
      await eventually(() => got.length === messages.length);
      expect(got).toEqual(messages);
    });

    it('brings a message sent to a node to that node alone, in the order sent', async () => {
      deployment = await deploy();
      const nodes = deployment.nodes;
      const received = record(nodes);
      const sessionId = randomUUID();
      const [from, to] = [nodes[0], nodes[nodes.length - 1]];
      const sent = Array.from({ length: 20 }, (_, n) => close(sessionId, n));
      for (const m of sent) await from.send(to.nodeId, m);
      const marker = await publishMarker(from, received);
      for (const [i, got] of received.entries())
        expect(got, `node ${i}`).toEqual(i === nodes.length - 1 ? [...sent, marker] : [marker]);
    });

    it("runs a message sent to its own node in that node's handlers before send resolves, and nowhere else", async () => {
      deployment = await deploy();
      const nodes = deployment.nodes;
      const received = record(nodes, 5);
      const message = close(randomUUID(), 1);
      await nodes[0].send(nodes[0].nodeId, message);
      expect(received[0]).toEqual([message]);
      const marker = await publishMarker(nodes[0], received);
      for (const [i, got] of received.entries()) expect(got).toEqual(i === 0 ? [message, marker] : [marker]);
    });

    it('sends nothing anywhere for a node that does not exist', async () => {
      deployment = await deploy();
      const received = record(deployment.nodes);
      await deployment.nodes[0].send(randomUUID(), close(randomUUID(), 1));
      const marker = await publishMarker(deployment.nodes[0], received);
      for (const got of received) expect(got).toEqual([marker]);
    });

    it('delivers nothing to a node after it closed', async () => {
      deployment = await deploy();
      const node = deployment.nodes[0];
      const got: BusMessage[] = [];
      node.subscribe((m) => void got.push(m));
      await node.close();
      await node.publish(close(randomUUID(), 1)).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 50));
      expect(got).toEqual([]);
    });
  });
}

export function presenceContract(
  name: string,
  deploy: () => Promise<Deployment<Presence>>,
  options: { nodesCanDie?: boolean } = {},
) {
  describe(`presence contract: ${name}`, () => {
    let deployment: Deployment<Presence>;
    afterEach(async () => deployment?.close());

    it('knows a claimed session as connected on every node until it is released', async () => {
      deployment = await deploy();
      const [holder] = deployment.nodes;
      const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
      await holder.claim(a, 'conn-a');
      await holder.claim(b, 'conn-b');
      for (const node of deployment.nodes) expect(await node.connected([a, b, c])).toEqual(new Set([a, b]));
      await holder.release(a, 'conn-a');
      for (const node of deployment.nodes) expect(await node.connected([a, b, c])).toEqual(new Set([b]));
    });

    it('names the node holding each session, on every node', async () => {
      deployment = await deploy();
      const nodes = deployment.nodes;
      const last = nodes[nodes.length - 1];
      const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
      await nodes[0].claim(a, 'conn-a');
      await last.claim(b, 'conn-b');
      for (const node of nodes)
        expect(await node.holders([a, b, c])).toEqual(
          new Map([
            [a, { node: nodes[0].nodeId, addressable: true }],
            [b, { node: last.nodeId, addressable: true }],
          ]),
        );
      // A newer connection elsewhere takes the session over.
      await last.claim(a, 'conn-a2');
      for (const node of nodes)
        expect((await node.holders([a])).get(a)).toEqual({ node: last.nodeId, addressable: true });
      await last.release(a, 'conn-a2');
      for (const node of nodes) expect(await node.holders([a, c])).toEqual(new Map());
      expect(await nodes[0].holders([])).toEqual(new Map());
    });

    it('ignores a release by a connection that no longer holds the session (a takeover)', async () => {
      deployment = await deploy();
      const nodes = deployment.nodes;
      const last = nodes[nodes.length - 1];
      const s = randomUUID();
      await nodes[0].claim(s, 'old');
      await last.claim(s, 'new');
      await nodes[0].release(s, 'old');
      for (const node of nodes) expect(await node.connected([s])).toEqual(new Set([s]));
      await last.release(s, 'new');
      for (const node of nodes) expect(await node.connected([s])).toEqual(new Set());
    });

    // One process cannot die apart from the whole deployment: only implementations that join
    // processes declare `kill`.
    if (options.nodesCanDie)
      it("frees a dead node's sessions within its lease", async () => {
        deployment = await deploy();
        const { kill, nodes } = deployment;
        if (!kill) throw new Error('a deployment whose nodes can die must say how to kill one');
        const [mine, theirs] = [randomUUID(), randomUUID()];
        await nodes[0].claim(mine, 'c1');
        await nodes[1].claim(theirs, 'c2');
        await kill.node(0);
        expect(await nodes[1].connected([mine, theirs])).toEqual(new Set([mine, theirs]));
        await new Promise((r) => setTimeout(r, kill.leaseMs + 100));
        expect(await nodes[1].connected([mine, theirs])).toEqual(new Set([theirs]));
        expect([...(await nodes[1].holders([mine, theirs])).keys()]).toEqual([theirs]);
      });

    it('answers an empty question with an empty set', async () => {
      deployment = await deploy();
      expect(await deployment.nodes[0].connected([])).toEqual(new Set());
    });
  });
}
