/**
 * `#/campaigns`: the tenant's streaming campaigns (CONTRACT §7) and a form to create one;
 * `#/campaigns/<campaignId>`: one campaign with its challenges (images uploaded, or many at once from
 * the template CSV), a player's progress with their claims and verifications, and the verification
 * of a reward code.
 */
import { INTENT_FORMS, REDEMPTION_METHODS, type RedemptionMethod } from '@liveline/protocol';
import { createTenantClient, type paths } from '@liveline/tenant';
import { useEffect, useId, useMemo, useState } from 'preact/hooks';
import { browserFetch, ok } from '../../shared/problem.ts';
import { Empty, ErrorAlert, formatDateTime } from '../../shared/ui.tsx';
import type { Api } from '../auth.ts';
import { pollingFeed, useFeed } from '../live.ts';
import type { PageProps } from '../pages.tsx';
import {
  BackLink,
  ConfirmButton,
  chosenFile,
  fileToBase64,
  fromLocalInput,
  OneTimeSecret,
  Outcome,
  shownOf,
  TableWrap,
  toLocalInput,
  useAction,
} from './kit.tsx';

type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never;
type CampaignList = Json<paths['/campaigns']['get']['responses'][200]>;
export type Campaign = CampaignList['campaigns'][number];
type CampaignBody = NonNullable<paths['/campaigns']['post']['requestBody']>['content']['application/json'];
type RedemptionConfig = Campaign['redemption'];
type ChallengeList = Json<paths['/campaigns/{campaignId}/challenges']['get']['responses'][200]>;
export type Challenge = ChallengeList['challenges'][number];
type RuleType = Challenge['rule']['type'];
type Progress = Json<paths['/campaigns/{campaignId}/players/{playerId}/progress']['get']['responses'][200]>;

/** The spec's wording of each rule: what the template's Reward Rules column holds. */
export const RULES: Record<RuleType, string> = {
  totalMinutes: 'Total mins streamed',
  singleSessionMinutes: 'Mins streamed in a single session',
  uniqueDays: 'Unique days streamed on',
  streakDays: 'Streak of days streamed on',
  sessionCount: 'Stream session count',
};
const UNITS: Record<RuleType, [string, string]> = {
  totalMinutes: ['minute', 'minutes'],
  singleSessionMinutes: ['minute', 'minutes'],
  uniqueDays: ['day', 'days'],
  streakDays: ['day', 'days'],
  sessionCount: ['stream', 'streams'],
};
/** "1 minute", "30 minutes": the unit of a rule's target. */
const unitOf = (type: RuleType, n: number) => UNITS[type][n === 1 ? 0 : 1];
const METHOD_LABELS: Record<RedemptionMethod, string> = {
  displayCode: 'Display code (shown to the player, checked at a desk)',
  webUrl: 'Web URL (the player visits a page)',
  intent: 'Android intent (the game opens it)',
};
export const TEMPLATE_HEADER = 'Reward Code,Reward Title,Reward Requirement,Reward Image,Reward Rules,Target';

export function CampaignsPage({ api, path }: PageProps) {
  if (path[0]) return <CampaignDetail api={api} campaignId={path[0]} />;
  return <CampaignList api={api} />;
}

/** Whether a campaign counts streaming now (`startsAt <= now < endsAt`). */
function phase(c: Campaign, now: number): 'scheduled' | 'running' | 'ended' {
  if (c.startsAt !== null && c.startsAt > now) return 'scheduled';
  if (c.endsAt !== null && c.endsAt <= now) return 'ended';
  return 'running';
}

function windowText(c: Campaign): string {
  if (c.startsAt === null && c.endsAt === null) return 'Always';
  return `${c.startsAt === null ? 'from the start' : formatDateTime(c.startsAt)} – ${
    c.endsAt === null ? 'open' : formatDateTime(c.endsAt)
  }`;
}

function campaignsFeed(api: Api) {
  return pollingFeed(() => ok(api.tenant.GET('/campaigns')), 10_000);
}

function CampaignList({ api }: { api: Api }) {
  const { data, error, feed } = useFeed(() => campaignsFeed(api), [api]);
  const now = Date.now();
  return (
    <section aria-labelledby="page-title" class="manage">
      <h1 id="page-title">Campaigns</h1>
      <ErrorAlert error={error} />
      {data === undefined && !error ? <p aria-busy="true">Loading campaigns…</p> : null}
      {data && data.campaigns.length > 0 ? (
        <TableWrap labelledBy="campaigns-caption">
          <table>
            <caption id="campaigns-caption">Campaigns</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Redemption</th>
                <th scope="col">Window</th>
                <th scope="col">Time zone</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {data.campaigns.map((c) => (
                <tr key={c.campaignId}>
                  <th scope="row">
                    <a href={`#/campaigns/${c.campaignId}`}>{c.name}</a>
                  </th>
                  <td>
                    <span class={`badge phase-${phase(c, now)}`}>{phase(c, now)}</span>
                  </td>
                  <td>{c.redemption.method}</td>
                  <td>{windowText(c)}</td>
                  <td>{c.timezone}</td>
                  <td>{formatDateTime(c.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      {data ? <p class="hint">{shownOf(data.campaigns.length, data.totalCount, 'campaigns')}</p> : null}
      {data && data.campaigns.length === 0 ? (
        <Empty title="No campaigns yet.">
          <p>
            Create one below: a campaign says when players' streaming counts and how they redeem a reward.
            Then add its challenges, and players see them on the viewer page.
          </p>
        </Empty>
      ) : null}
      <CreateCampaign api={api} onCreated={() => feed.refresh()} />
    </section>
  );
}

interface RedemptionDraft {
  method: RedemptionMethod;
  instructionsTemplate: string;
  urlTemplate: string;
  form: (typeof INTENT_FORMS)[number];
  packageName: string;
  activityName: string;
  action: string;
  category: string;
  flags: string;
  dataUrlTemplate: string;
}

const NEW_REDEMPTION: RedemptionDraft = {
  method: 'displayCode',
  instructionsTemplate: 'Show {code} at the front desk to collect {rewardTitle}.',
  urlTemplate: 'https://example.com/rewards?achievement={achievement.code}&reward={reward.code}',
  form: 'startActivity',
  packageName: '',
  activityName: '',
  action: '',
  category: '',
  flags: '',
  dataUrlTemplate: 'https://example.com/reward?achievement={achievement.code}&reward={reward.code}',
};

function draftOf(r: RedemptionConfig): RedemptionDraft {
  const d = { ...NEW_REDEMPTION, method: r.method };
  if (r.method === 'displayCode') return { ...d, instructionsTemplate: r.instructionsTemplate };
  if (r.method === 'webUrl') return { ...d, urlTemplate: r.urlTemplate };
  return {
    ...d,
    form: r.form,
    packageName: r.packageName,
    activityName: r.activityName ?? '',
    action: r.action ?? '',
    category: r.category ?? '',
    flags: r.flags == null ? '' : String(r.flags),
    dataUrlTemplate: r.dataUrlTemplate,
  };
}

/** The draft as the API takes it: optional intent fields left out when empty. */
function redemptionOf(d: RedemptionDraft): RedemptionConfig {
  if (d.method === 'displayCode')
    return { method: 'displayCode', instructionsTemplate: d.instructionsTemplate };
  if (d.method === 'webUrl') return { method: 'webUrl', urlTemplate: d.urlTemplate.trim() };
  const optional = (v: string) => (v.trim() === '' ? undefined : v.trim());
  let flags: number | undefined;
  if (d.flags.trim() !== '') {
    flags = Number(d.flags.trim());
    if (!Number.isInteger(flags))
      throw new Error(`Flags: “${d.flags}” is not a whole number (e.g. 268435456 or 0x10000000).`);
    flags |= 0; // an int32, as Android's Intent flags are
  }
  return {
    method: 'intent',
    form: d.form,
    packageName: d.packageName.trim(),
    activityName: optional(d.activityName),
    action: optional(d.action),
    category: optional(d.category),
    flags,
    dataUrlTemplate: d.dataUrlTemplate.trim(),
  };
}

function RedemptionFields({
  draft,
  onChange,
}: {
  draft: RedemptionDraft;
  onChange: (d: RedemptionDraft) => void;
}) {
  const id = useId();
  const text = (
    key: keyof RedemptionDraft,
    label: string,
    options: { required?: boolean; hint?: string } = {},
  ) => {
    const hintId = `${id}-${key}-hint`;
    return (
      <>
        <label>
          {label}
          <input
            value={draft[key]}
            required={options.required}
            spellcheck={false}
            aria-describedby={options.hint ? hintId : undefined}
            onInput={(e) => onChange({ ...draft, [key]: (e.currentTarget as HTMLInputElement).value })}
          />
        </label>
        {options.hint ? (
          <p class="hint" id={hintId}>
            {options.hint}
          </p>
        ) : null}
      </>
    );
  };
  return (
    <fieldset>
      <legend>How players redeem a reward</legend>
      <label>
        Redemption
        <select
          value={draft.method}
          onChange={(e) =>
            onChange({ ...draft, method: (e.currentTarget as HTMLSelectElement).value as RedemptionMethod })
          }
        >
          {REDEMPTION_METHODS.map((m) => (
            <option key={m} value={m}>
              {METHOD_LABELS[m]}
            </option>
          ))}
        </select>
      </label>
      {draft.method === 'displayCode'
        ? text('instructionsTemplate', 'Instructions', {
            required: true,
            hint: 'Shown with the code: must contain {code}; may use {rewardTitle}.',
          })
        : null}
      {draft.method === 'webUrl'
        ? text('urlTemplate', 'URL template', {
            required: true,
            hint: 'An http(s) URL containing {achievement.code} and {reward.code} (filled URL-encoded).',
          })
        : null}
      {draft.method === 'intent' ? (
        <div class="grid">
          <label>
            Intent form
            <select
              value={draft.form}
              onChange={(e) =>
                onChange({
                  ...draft,
                  form: (e.currentTarget as HTMLSelectElement).value as RedemptionDraft['form'],
                })
              }
            >
              {INTENT_FORMS.map((f) => (
                <option key={f} value={f}>
                  {f}
                </option>
              ))}
            </select>
          </label>
          {text('packageName', 'Package name', { required: true })}
          {text('activityName', 'Activity name')}
          {text('action', 'Action')}
          {text('category', 'Category')}
          {text('flags', 'Flags')}
        </div>
      ) : null}
      {draft.method === 'intent'
        ? text('dataUrlTemplate', 'Data URL template', {
            required: true,
            hint: 'Contains {achievement.code} and {reward.code}; also the link players open in a browser.',
          })
        : null}
    </fieldset>
  );
}

/** The IANA zones this browser knows, for the time zone field's suggestions. */
function timeZones(): string[] {
  try {
    return (Intl as unknown as { supportedValuesOf(k: string): string[] }).supportedValuesOf('timeZone');
  } catch {
    return ['UTC'];
  }
}

interface CampaignDraft {
  name: string;
  timezone: string;
  startsAt: string;
  endsAt: string;
  redemption: RedemptionDraft;
}

function CampaignFields({ draft, onChange }: { draft: CampaignDraft; onChange: (d: CampaignDraft) => void }) {
  const zones = useMemo(timeZones, []);
  const set = (key: 'name' | 'timezone' | 'startsAt' | 'endsAt') => (e: Event) =>
    onChange({ ...draft, [key]: (e.currentTarget as HTMLInputElement).value });
  return (
    <>
      <div class="row">
        <label>
          Campaign name
          <input value={draft.name} required maxLength={200} onInput={set('name')} />
        </label>
        <label>
          Time zone
          <input value={draft.timezone} list="time-zones" spellcheck={false} onInput={set('timezone')} />
          <datalist id="time-zones">
            {zones.map((z) => (
              <option key={z} value={z} />
            ))}
          </datalist>
        </label>
      </div>
      <div class="row">
        <label>
          Starts
          <input type="datetime-local" value={draft.startsAt} onInput={set('startsAt')} />
        </label>
        <label>
          Ends
          <input type="datetime-local" value={draft.endsAt} onInput={set('endsAt')} />
        </label>
      </div>
      <p class="hint">
        Start and end are in your browser's time; leave them empty for a campaign that runs from now on. The
        time zone decides where a calendar day begins (for the day and streak rules).
      </p>
      <RedemptionFields
        draft={draft.redemption}
        onChange={(redemption) => onChange({ ...draft, redemption })}
      />
    </>
  );
}

function campaignBody(d: CampaignDraft): CampaignBody {
  return {
    name: d.name.trim(),
    timezone: d.timezone.trim() || 'UTC',
    startsAt: fromLocalInput(d.startsAt),
    endsAt: fromLocalInput(d.endsAt),
    redemption: redemptionOf(d.redemption),
  };
}

const NEW_CAMPAIGN: CampaignDraft = {
  name: '',
  timezone: 'UTC',
  startsAt: '',
  endsAt: '',
  redemption: NEW_REDEMPTION,
};

function CreateCampaign({ api, onCreated }: { api: Api; onCreated: () => void }) {
  const [draft, setDraft] = useState<CampaignDraft>(NEW_CAMPAIGN);
  const [created, setCreated] = useState<{ campaignId: string; name: string; secret: string } | null>(null);
  const { busy, error, status, run } = useAction();
  return (
    <section class="panel" aria-labelledby="new-campaign-title">
      <h2 id="new-campaign-title">New campaign</h2>
      {created ? (
        <OneTimeSecret label="Campaign secret" value={created.secret} onDone={() => setCreated(null)}>
          <p class="hint">
            Your claims machine verifies players' codes with it (<code>POST /campaigns/verifyrewardcode</code>
            ). <a href={`#/campaigns/${created.campaignId}`}>Open {created.name}</a> to add its challenges.
          </p>
        </OneTimeSecret>
      ) : null}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => {
            const c = await ok(api.tenant.POST('/campaigns', { body: campaignBody(draft) }));
            setCreated({ campaignId: c.campaignId, name: c.name, secret: c.campaignSecret });
            setDraft(NEW_CAMPAIGN);
            onCreated();
            return `Campaign ${c.name} created.`;
          });
        }}
      >
        <CampaignFields draft={draft} onChange={setDraft} />
        <button type="submit" disabled={busy}>
          Create campaign
        </button>
        <Outcome error={error} status={status} />
      </form>
    </section>
  );
}

// ---------------------------------------------------------------------------------------------
// One campaign

function campaignFeed(api: Api, campaignId: string) {
  const path = { params: { path: { campaignId } } };
  return pollingFeed(async () => {
    const [campaign, challenges] = await Promise.all([
      ok(api.tenant.GET('/campaigns/{campaignId}', path)),
      ok(api.tenant.GET('/campaigns/{campaignId}/challenges', path)),
    ]);
    return { campaign, challenges };
  }, 10_000);
}

function CampaignDetail({ api, campaignId }: { api: Api; campaignId: string }) {
  const { data, error, feed } = useFeed(() => campaignFeed(api, campaignId), [api, campaignId]);
  const c = data?.campaign;
  return (
    <section aria-labelledby="page-title" class="detail manage">
      <BackLink href="#/campaigns">Campaigns</BackLink>
      <h1 id="page-title">{c ? `Campaign ${c.name}` : 'Campaign'}</h1>
      <ErrorAlert error={error} />
      {!data && !error ? <p aria-busy="true">Loading the campaign…</p> : null}
      {data && c ? (
        <>
          <div class="columns">
            <div>
              <CampaignFacts campaign={c} />
              <EditCampaign api={api} campaign={c} onSaved={() => feed.refresh()} />
              <CampaignSecret api={api} campaign={c} />
            </div>
            <div>
              <VerifyCode api={api} campaign={c} />
            </div>
          </div>
          <ChallengesTable
            api={api}
            campaign={c}
            challenges={data.challenges.challenges}
            total={data.challenges.totalCount}
            onChanged={() => feed.refresh()}
          />
          <div class="columns">
            <AddChallenge api={api} campaign={c} onAdded={() => feed.refresh()} />
            <ImportChallenges api={api} campaign={c} onImported={() => feed.refresh()} />
          </div>
          <PlayerProgress api={api} campaign={c} />
        </>
      ) : null}
    </section>
  );
}

function describeRedemption(r: RedemptionConfig): string {
  if (r.method === 'displayCode') return `Display code: “${r.instructionsTemplate}”`;
  if (r.method === 'webUrl') return `Web URL: ${r.urlTemplate}`;
  const target = r.activityName ? `${r.packageName}/${r.activityName}` : r.packageName;
  return `Intent: ${r.form} ${target}${r.action ? ` · action ${r.action}` : ''} · data ${r.dataUrlTemplate}`;
}

function CampaignFacts({ campaign: c }: { campaign: Campaign }) {
  const p = phase(c, Date.now());
  return (
    <dl class="facts">
      <dt>Campaign ID</dt>
      <dd>
        <code class="id">{c.campaignId}</code>
      </dd>
      <dt>Status</dt>
      <dd>
        <span class={`badge phase-${p}`}>{p}</span>
      </dd>
      <dt>Window</dt>
      <dd>{windowText(c)}</dd>
      <dt>Time zone</dt>
      <dd>{c.timezone}</dd>
      <dt>Redemption</dt>
      <dd class="wrap">{describeRedemption(c.redemption)}</dd>
      <dt>Created</dt>
      <dd>{formatDateTime(c.createdAt)}</dd>
    </dl>
  );
}

function EditCampaign({ api, campaign: c, onSaved }: { api: Api; campaign: Campaign; onSaved: () => void }) {
  const initial = (): CampaignDraft => ({
    name: c.name,
    timezone: c.timezone,
    startsAt: toLocalInput(c.startsAt),
    endsAt: toLocalInput(c.endsAt),
    redemption: draftOf(c.redemption),
  });
  const [draft, setDraft] = useState<CampaignDraft>(initial);
  const [open, setOpen] = useState(false);
  const { busy, error, status, run } = useAction();
  return (
    <section class="panel" aria-labelledby="edit-campaign-title">
      <h2 id="edit-campaign-title">Settings</h2>
      {!open ? (
        <button
          type="button"
          class="secondary"
          onClick={() => {
            setDraft(initial());
            setOpen(true);
          }}
        >
          Edit campaign
        </button>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              // Only what was changed: a field shown to the minute must not move a time set to the second.
              const before = campaignBody(initial());
              const after = campaignBody(draft);
              const body = Object.fromEntries(
                Object.entries(after).filter(
                  ([k, v]) => JSON.stringify(v) !== JSON.stringify(before[k as keyof CampaignBody]),
                ),
              ) as Partial<CampaignBody>;
              if (Object.keys(body).length === 0) {
                setOpen(false);
                return 'Nothing was changed.';
              }
              await ok(
                api.tenant.PATCH('/campaigns/{campaignId}', {
                  params: { path: { campaignId: c.campaignId } },
                  body,
                }),
              );
              setOpen(false);
              onSaved();
              return 'Campaign saved. Claims already made keep the redemption they were given.';
            });
          }}
        >
          <CampaignFields draft={draft} onChange={setDraft} />
          <div class="row buttons">
            <button type="submit" disabled={busy}>
              Save campaign
            </button>
            <button type="button" class="secondary" onClick={() => setOpen(false)}>
              Cancel
            </button>
          </div>
        </form>
      )}
      <Outcome error={error} status={status} />
    </section>
  );
}

function CampaignSecret({ api, campaign: c }: { api: Api; campaign: Campaign }) {
  const [secret, setSecret] = useState<string | null>(null);
  const { busy, error, status, run } = useAction();
  return (
    <section class="panel" aria-labelledby="campaign-secret-title">
      <h2 id="campaign-secret-title">Campaign secret</h2>
      <p class="hint">
        Shown once, when the campaign was created. A new one replaces it at once: the old secret stops
        working.
      </p>
      {secret ? (
        <OneTimeSecret label="New campaign secret" value={secret} onDone={() => setSecret(null)} />
      ) : null}
      <ConfirmButton
        label="Rotate campaign secret"
        confirmLabel="Rotate now"
        question="Replace the campaign secret? The current one stops working at once."
        disabled={busy}
        onConfirm={() =>
          run(async () => {
            const rotated = await ok(
              api.tenant.POST('/campaigns/{campaignId}/secret/rotate', {
                params: { path: { campaignId: c.campaignId } },
                body: {},
              }),
            );
            setSecret(rotated.campaignSecret);
            return 'The campaign has a new secret.';
          })
        }
      />
      <Outcome error={error} status={status} />
    </section>
  );
}

/** A challenge's image, read with the console's token (an <img> alone could not send it). */
function useChallengeImage(api: Api, c: Challenge): string | null {
  const [url, setUrl] = useState<string | null>(null);
  useEffect(() => {
    let objectUrl: string | null = null;
    let cancelled = false;
    void api.tenant
      .GET('/campaigns/{campaignId}/challenges/{challengeId}/image', {
        params: { path: { campaignId: c.campaignId, challengeId: c.challengeId } },
        parseAs: 'blob',
      })
      .then(({ data }) => {
        if (cancelled || !(data instanceof Blob)) return;
        objectUrl = URL.createObjectURL(data);
        setUrl(objectUrl);
      })
      .catch(() => undefined);
    return () => {
      cancelled = true;
      if (objectUrl) URL.revokeObjectURL(objectUrl);
    };
  }, [api, c.campaignId, c.challengeId, c.updatedAt]);
  return url;
}

function ChallengeImage({ api, challenge }: { api: Api; challenge: Challenge }) {
  const url = useChallengeImage(api, challenge);
  return url ? (
    <img class="thumb" src={url} alt={`Reward: ${challenge.rewardTitle}`} width={64} height={64} />
  ) : (
    <span class="thumb placeholder" aria-hidden="true" />
  );
}

function ChallengesTable({
  api,
  campaign,
  challenges,
  total,
  onChanged,
}: {
  api: Api;
  campaign: Campaign;
  challenges: Challenge[];
  total: number;
  onChanged: () => void;
}) {
  const { busy, error, status, run } = useAction();
  return (
    <section class="panel" aria-labelledby="challenges-title">
      <h2 id="challenges-title">Challenges</h2>
      <Outcome error={error} status={status} />
      {challenges.length > 0 ? (
        <TableWrap labelledBy="challenges-caption">
          <table>
            <caption id="challenges-caption" class="visually-hidden">
              Challenges
            </caption>
            <thead>
              <tr>
                <th scope="col">Image</th>
                <th scope="col">Reward title</th>
                <th scope="col">Reward code</th>
                <th scope="col">Requirement</th>
                <th scope="col">Rule</th>
                <th scope="col">Target</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {challenges.map((ch) => (
                <tr key={ch.challengeId}>
                  <td>
                    <ChallengeImage api={api} challenge={ch} />
                  </td>
                  <th scope="row">{ch.rewardTitle}</th>
                  <td>
                    <code>{ch.rewardCode}</code>
                  </td>
                  <td class="details">{ch.rewardRequirement}</td>
                  <td>{RULES[ch.rule.type]}</td>
                  <td class="num">
                    {ch.rule.target} {unitOf(ch.rule.type, ch.rule.target)}
                  </td>
                  <td>
                    <ConfirmButton
                      label="Delete"
                      confirmLabel="Delete challenge"
                      question={`Delete ${ch.rewardTitle}? Only an unclaimed challenge can be deleted.`}
                      disabled={busy}
                      onConfirm={() =>
                        run(async () => {
                          await ok(
                            api.tenant.DELETE('/campaigns/{campaignId}/challenges/{challengeId}', {
                              params: {
                                path: { campaignId: campaign.campaignId, challengeId: ch.challengeId },
                              },
                            }),
                          );
                          onChanged();
                          return `Challenge ${ch.rewardTitle} deleted.`;
                        })
                      }
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : (
        <Empty title="No challenges yet.">
          <p>
            Add one below with its 200×200 JPEG image, or import many at once from the template CSV. Players
            see them on the viewer page while the campaign runs.
          </p>
        </Empty>
      )}
      <p class="hint">{shownOf(challenges.length, total, 'challenges')}</p>
    </section>
  );
}

function RuleFields() {
  return (
    <div class="row">
      <label>
        Rule
        <select name="ruleType" required>
          {(Object.keys(RULES) as RuleType[]).map((r) => (
            <option key={r} value={r}>
              {RULES[r]}
            </option>
          ))}
        </select>
      </label>
      <label>
        Target
        <input name="target" type="number" min={1} max={1_000_000} step={1} required inputMode="numeric" />
      </label>
    </div>
  );
}

function AddChallenge({ api, campaign, onAdded }: { api: Api; campaign: Campaign; onAdded: () => void }) {
  const { busy, error, status, run } = useAction();
  const [preview, setPreview] = useState<string | null>(null);
  useEffect(() => () => void (preview && URL.revokeObjectURL(preview)), [preview]);
  return (
    <section class="panel" aria-labelledby="add-challenge-title">
      <h2 id="add-challenge-title">Add a challenge</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const form = e.currentTarget as HTMLFormElement;
          const data = new FormData(form);
          const text = (name: string) => String(data.get(name) ?? '').trim();
          void run(async () => {
            const image = chosenFile(form, 'image');
            if (!image) throw new Error('Choose the reward image: a 200×200 JPEG.');
            const created = await ok(
              api.tenant.POST('/campaigns/{campaignId}/challenges', {
                params: { path: { campaignId: campaign.campaignId } },
                body: {
                  rewardCode: text('rewardCode'),
                  rewardTitle: text('rewardTitle'),
                  rewardRequirement: text('rewardRequirement'),
                  rewardImage: await fileToBase64(image),
                  rule: { type: text('ruleType') as RuleType, target: Number(text('target')) },
                },
              }),
            );
            form.reset();
            setPreview(null);
            onAdded();
            return `Challenge ${created.rewardTitle} added.`;
          });
        }}
      >
        <div class="row">
          <label>
            Reward code
            <input name="rewardCode" required maxLength={64} spellcheck={false} />
          </label>
          <label>
            Reward title
            <input name="rewardTitle" required />
          </label>
        </div>
        <label>
          Reward requirement
          <input name="rewardRequirement" required placeholder="Stream for 30 minutes in total" />
        </label>
        <RuleFields />
        <div class="image-field">
          <label>
            Reward image (JPEG, 200×200)
            <input
              name="image"
              type="file"
              accept="image/jpeg,.jpg,.jpeg"
              required
              onChange={(e) => {
                const file = (e.currentTarget as HTMLInputElement).files?.[0];
                setPreview(file ? URL.createObjectURL(file) : null);
              }}
            />
          </label>
          {preview ? (
            <img class="thumb" src={preview} alt="Preview of the chosen file" width={64} height={64} />
          ) : null}
        </div>
        <button type="submit" disabled={busy}>
          Add challenge
        </button>
        <Outcome error={error} status={status} />
      </form>
    </section>
  );
}

/** The template with one example row, as a file to download. */
function templateHref(): string {
  const example = 'GOLD-VISOR,Golden visor,Stream for 30 minutes in total,visor.jpg,Total mins streamed,30';
  return URL.createObjectURL(new Blob([`${TEMPLATE_HEADER}\r\n${example}\r\n`], { type: 'text/csv' }));
}

function ImportChallenges({
  api,
  campaign,
  onImported,
}: {
  api: Api;
  campaign: Campaign;
  onImported: () => void;
}) {
  const { busy, error, status, run } = useAction();
  const [href, setHref] = useState<string | null>(null);
  useEffect(() => {
    const url = templateHref();
    setHref(url);
    return () => URL.revokeObjectURL(url);
  }, []);
  return (
    <section class="panel" aria-labelledby="import-title">
      <h2 id="import-title">Import challenges (CSV)</h2>
      <p class="hint">
        The template's header is <code>{TEMPLATE_HEADER}</code>. Reward Image names one of the images chosen
        below (by file name); Reward Rules is the rule's wording, e.g. <em>Total mins streamed</em>. Any bad
        row rejects the whole import.{' '}
        {href ? (
          <a href={href} download="liveline-challenges-template.csv">
            Download the template
          </a>
        ) : null}
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const form = e.currentTarget as HTMLFormElement;
          void run(async () => {
            const template = chosenFile(form, 'template');
            if (!template) throw new Error('Choose the template CSV.');
            const body = new FormData();
            body.append('template', template, template.name);
            const images = form.elements.namedItem('images') as HTMLInputElement;
            for (const image of Array.from(images.files ?? [])) body.append(image.name, image, image.name);
            const answer = await ok(
              api.tenant.POST('/campaigns/{campaignId}/challenges/import', {
                params: { path: { campaignId: campaign.campaignId } },
                body: body as never,
                // The browser writes the multipart body and its boundary.
                bodySerializer: (b: unknown) => b as FormData,
              }),
            );
            form.reset();
            onImported();
            return `Imported ${answer.imported} ${answer.imported === 1 ? 'challenge' : 'challenges'}.`;
          });
        }}
      >
        <label>
          Template (CSV)
          <input name="template" type="file" accept=".csv,text/csv" required />
        </label>
        <label>
          Images (JPEG, 200×200)
          <input name="images" type="file" accept="image/jpeg,.jpg,.jpeg" multiple />
        </label>
        <button type="submit" disabled={busy}>
          Import challenges
        </button>
        <Outcome error={error} status={status} />
      </form>
    </section>
  );
}

/** Players seen within the last day: suggestions for the progress form (none when sessions are not readable). */
function useRecentPlayers(api: Api): string[] {
  const [players, setPlayers] = useState<string[]>([]);
  useEffect(() => {
    let cancelled = false;
    void ok(
      api.tenant.GET('/sessions/active/page/{pageNumber}', {
        params: { path: { pageNumber: 1 }, query: { minutes: 1440, pageSize: 200 } },
      }),
    )
      .then((page) => {
        if (!cancelled) setPlayers([...new Set(page.sessions.map((s) => s.playerId))].sort());
      })
      .catch(() => undefined);
    return () => {
      cancelled = true;
    };
  }, [api]);
  return players;
}

const STATUS_LABELS: Record<Progress['challenges'][number]['status'], string> = {
  inProgress: 'in progress',
  complete: 'complete',
  claimed: 'claimed',
};

function PlayerProgress({ api, campaign }: { api: Api; campaign: Campaign }) {
  const players = useRecentPlayers(api);
  const [playerId, setPlayerId] = useState('');
  const [shown, setShown] = useState('');
  const { data, error } = useFeed(
    () =>
      pollingFeed<Progress | null>(async () => {
        if (!shown) return null;
        return ok(
          api.tenant.GET('/campaigns/{campaignId}/players/{playerId}/progress', {
            params: { path: { campaignId: campaign.campaignId, playerId: shown } },
          }),
        );
      }, 5000),
    [api, campaign.campaignId, shown],
  );
  return (
    <section class="panel" aria-labelledby="progress-title">
      <h2 id="progress-title">Player progress</h2>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          setShown(playerId.trim());
        }}
      >
        <label>
          Player ID
          <input
            value={playerId}
            list="recent-players"
            required
            spellcheck={false}
            onInput={(e) => setPlayerId((e.currentTarget as HTMLInputElement).value)}
          />
          <datalist id="recent-players">
            {players.map((p) => (
              <option key={p} value={p} />
            ))}
          </datalist>
        </label>
        <button type="submit">Show progress</button>
      </form>
      {!shown ? (
        <p class="hint">
          A player's progress on every challenge, their claims and whether each claim was verified; it updates
          every 5 s.
        </p>
      ) : null}
      {shown ? <ErrorAlert error={error} /> : null}
      {shown && data ? (
        <>
          <TableWrap labelledBy="progress-caption">
            <table>
              <caption id="progress-caption">Progress of {data.playerId}</caption>
              <thead>
                <tr>
                  <th scope="col">Challenge</th>
                  <th scope="col">Progress</th>
                  <th scope="col">Status</th>
                  <th scope="col">Claim</th>
                  <th scope="col">Verified</th>
                </tr>
              </thead>
              <tbody>
                {data.challenges.map((ch) => (
                  <tr key={ch.challengeId}>
                    <th scope="row">{ch.rewardTitle}</th>
                    <td class="num">
                      <ProgressMeter
                        value={ch.progress.value}
                        target={ch.progress.target}
                        title={ch.rewardTitle}
                      />{' '}
                      {ch.progress.value} / {ch.progress.target} {unitOf(ch.rule.type, ch.progress.target)}
                    </td>
                    <td>
                      <span class={`badge progress-${ch.status}`}>{STATUS_LABELS[ch.status]}</span>
                    </td>
                    <td>{ch.claimId === null ? '—' : `#${ch.claimId} on ${formatDateTime(ch.claimedAt)}`}</td>
                    <td>
                      {ch.claimId === null ? (
                        '—'
                      ) : ch.verifiedAt === null ? (
                        <span class="badge">not verified</span>
                      ) : (
                        <span class="badge ok">verified {formatDateTime(ch.verifiedAt)}</span>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
          {data.challenges.length === 0 ? (
            <p class="hint">The campaign has no challenges yet: add them below.</p>
          ) : null}
          <p class="hint">
            Evaluated {formatDateTime(data.evaluatedAt)}:{' '}
            {[
              `${data.metrics.totalMinutes} ${unitOf('totalMinutes', data.metrics.totalMinutes)} streamed in total`,
              `${data.metrics.sessionCount} ${unitOf('sessionCount', data.metrics.sessionCount)} of a minute or more`,
              `${data.metrics.uniqueDays} ${unitOf('uniqueDays', data.metrics.uniqueDays)} streamed on`,
            ].join(', ')}
            .
          </p>
        </>
      ) : null}
    </section>
  );
}

function ProgressMeter({ value, target, title }: { value: number; target: number; title: string }) {
  const shown = Math.min(value, target);
  return (
    <span
      class="meter"
      role="progressbar"
      aria-label={`Progress toward ${title}`}
      aria-valuemin={0}
      aria-valuemax={target}
      aria-valuenow={shown}
    >
      <span style={{ width: `${target > 0 ? (shown / target) * 100 : 0}%` }} />
    </span>
  );
}

function VerifyCode({ api, campaign }: { api: Api; campaign: Campaign }) {
  const { busy, error, status, run } = useAction();
  return (
    <section class="panel" aria-labelledby="verify-title">
      <h2 id="verify-title">Verify a reward code</h2>
      <p class="hint">
        What your claims machine does: the first verification of a claim marks it verified (redeemed); a
        second one says it already was.
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const form = e.currentTarget as HTMLFormElement;
          const data = new FormData(form);
          void run(async () => {
            // Its own client: the route takes no bearer token, and a refused secret (401) is not the
            // console's sign-in expiring.
            const verifier = createTenantClient({
              baseUrl: window.location.origin,
              accessToken: api.auth.accessToken,
              fetch: browserFetch,
            });
            const v = await ok(
              verifier.POST('/campaigns/verifyrewardcode', {
                body: {
                  campaignSecret: String(data.get('campaignSecret') ?? '').trim(),
                  verificationCode: String(data.get('verificationCode') ?? '').trim(),
                  campaignId: campaign.campaignId,
                },
              }),
            );
            return `${v.alreadyVerified ? 'Already verified' : 'Verified'}: claim #${v.claimId}, reward ${
              v.rewardCode
            }, player ${v.playerId}, claimed ${formatDateTime(v.claimedAt)}${
              v.alreadyVerified ? `, first verified ${formatDateTime(v.verifiedAt)}` : ''
            }.`;
          });
        }}
      >
        <div class="row">
          <label>
            Campaign secret
            <input name="campaignSecret" type="password" required autocomplete="off" spellcheck={false} />
          </label>
          <label>
            Display or achievement code
            <input name="verificationCode" required autocomplete="off" spellcheck={false} />
          </label>
        </div>
        <button type="submit" disabled={busy}>
          Verify code
        </button>
        <Outcome error={error} status={status} />
      </form>
    </section>
  );
}
