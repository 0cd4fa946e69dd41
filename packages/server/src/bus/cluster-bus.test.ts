import { describe, expect, it } from 'vitest';
import { busContract } from '../../test/contracts/bus.contract.ts';
import type { BusMessage } from './bus.ts';
import { ClusterBus } from './cluster-bus.ts';

/**
 * A transport as Redis pub/sub is: every payload published reaches every node of the wire, the
 * sender too (its echo), later and in publish order; one sent to a node reaches that node alone.
 */
class LoopbackBus extends ClusterBus {
  constructor(private readonly wire: LoopbackBus[]) {
    super((err) => {
      throw err;
    });
    wire.push(this);
  }

  protected async doPublish(payload: string): Promise<void> {
    setImmediate(() => {
      for (const node of this.wire) node.onClusterMessage(payload);
    });
  }

  protected async doSend(nodeId: string, payload: string): Promise<void> {
    setImmediate(() => {
      for (const node of this.wire) if (node.nodeId === nodeId) node.onClusterMessage(payload);
    });
  }

  /** A payload as another node, of this or an earlier version, would send it. */
  receive(payload: string) {
    this.onClusterMessage(payload);
  }
}

function deployment(n: number) {
  const wire: LoopbackBus[] = [];
  const nodes = Array.from({ length: n }, () => new LoopbackBus(wire));
  return { nodes, close: async () => Promise.all(nodes.map((node) => node.close())).then(() => {}) };
}

busContract('cluster (loopback transport, echoes included)', async () => deployment(3));

describe('ClusterBus', () => {
  const message: BusMessage = { type: 'close', sessionId: 's1', code: 4009, reason: 'ended' };

  it('runs its own messages once (not again when the transport echoes them back)', async () => {
    const { nodes } = deployment(2);
    const got: BusMessage[][] = [[], []];
    for (const [i, node] of nodes.entries()) node.subscribe((m) => void got[i].push(m));
    await nodes[0].publish(message);
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(got).toEqual([[message], [message]]);
  });

  it("reads another node's payload whatever the order of its fields, and drops its own in any order", () => {
    const { nodes } = deployment(2);
    const got: BusMessage[] = [];
    nodes[1].subscribe((m) => void got.push(m));
    nodes[1].receive(JSON.stringify({ message, origin: nodes[0].nodeId }));
    nodes[1].receive(JSON.stringify({ origin: nodes[0].nodeId, message }));
    nodes[1].receive(JSON.stringify({ message, origin: nodes[1].nodeId }));
    nodes[1].receive(JSON.stringify({ origin: nodes[1].nodeId, message }));
    expect(got).toEqual([message, message]);
  });
});
