import { ASPECT_RATIO_LABELS, RESOLUTION_LABELS } from '@liveline/protocol';

/** A stream's resolution and aspect ratio pickers (CONTRACT §3 enums), for one session or a cohort. */
export function StreamFormatFields(props: {
  resolution: number;
  aspectratio: number;
  onResolution: (value: number) => void;
  onAspectratio: (value: number) => void;
  disabled?: boolean;
}) {
  const picker = (
    label: string,
    labels: Record<number, string>,
    value: number,
    onChange: (value: number) => void,
  ) => (
    <label>
      {label}
      <select
        value={String(value)}
        disabled={props.disabled}
        onChange={(e) => onChange(Number((e.currentTarget as HTMLSelectElement).value))}
      >
        {Object.entries(labels).map(([v, text]) => (
          <option key={v} value={v}>
            {text}
          </option>
        ))}
      </select>
    </label>
  );
  return (
    <>
      {picker('Resolution', RESOLUTION_LABELS, props.resolution, props.onResolution)}
      {picker('Aspect ratio', ASPECT_RATIO_LABELS, props.aspectratio, props.onAspectratio)}
    </>
  );
}
