import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import type { StoredEvent } from './live.ts';

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** fps and battery over time, from a session's Health events (uPlot: a canvas, redrawn in place). */
export function HealthChart({ health }: { health: StoredEvent[] }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  const data: uPlot.AlignedData = [
    health.map((e) => e.timestamp / 1000),
    health.map((e) => num(e.fps)),
    health.map((e) => num(e.batteryLevel)),
  ];

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const dark = window.matchMedia?.('(prefers-color-scheme: dark)').matches;
    const axis = { stroke: dark ? '#c9d1d9' : '#333', grid: { stroke: dark ? '#30363d' : '#e5e5e5' } };
    const u = new uPlot(
      {
        width: Math.max(280, el.clientWidth),
        height: 220,
        cursor: { drag: { x: false, y: false } },
        scales: {
          x: { time: true },
          fps: { range: (_u, _min, max) => [0, Math.max(30, max ?? 0)] },
          pct: { range: [0, 100] },
        },
        series: [
          {},
          { label: 'fps', scale: 'fps', stroke: '#2563eb', width: 2, spanGaps: true },
          { label: 'battery %', scale: 'pct', stroke: '#16a34a', width: 2, spanGaps: true },
        ],
        axes: [
          axis,
          { ...axis, scale: 'fps', label: 'fps' },
          { ...axis, scale: 'pct', side: 1, label: 'battery %', grid: { show: false } },
        ],
      },
      data,
      el,
    );
    plot.current = u;
    const resize = new ResizeObserver(() => u.setSize({ width: Math.max(280, el.clientWidth), height: 220 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, []);

  useEffect(() => {
    plot.current?.setData(data);
  });

  const last = health[health.length - 1];
  const summary = last
    ? `Latest Health event: ${num(last.fps) ?? '—'} fps, battery ${num(last.batteryLevel) ?? '—'} %, ${health.length} points.`
    : 'No Health events yet: the chart fills in as the headset reports fps and battery.';
  return (
    <figure class="chart">
      <div ref={box} aria-hidden="true" />
      <figcaption>{summary}</figcaption>
    </figure>
  );
}
