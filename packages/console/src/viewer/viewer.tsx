import {
  type Challenge,
  type Claim,
  claim as claimChallenge,
  HttpClient,
  LivelineError,
  challenges as listChallenges,
  type Redemption,
} from '@liveline/client';
import { createTenantClient } from '@liveline/tenant';
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { browserFetch } from '../shared/problem.ts';

/** Progress is read again this often (CONTRACT §10: within 15 s), and whenever the page comes back into view. */
export const REFRESH_MS = 10_000;

/** The device token from `/viewer#token=…` (the fragment never reaches the server or its logs). */
export function tokenFromFragment(hash: string): string | null {
  const token = new URLSearchParams(hash.replace(/^#/, '')).get('token');
  return token && token.trim() !== '' ? token.trim() : null;
}

function describeFailure(err: unknown): string {
  if (err instanceof LivelineError) {
    if (err.status === 401)
      return `This link's token is not accepted: ${err.detail} Ask the game for a new link.`;
    if (err.status === 0) return `The server could not be reached (${err.detail}). Check the connection.`;
    return err.detail;
  }
  return err instanceof Error ? err.message : String(err);
}

const UNITS: Record<Challenge['rule']['type'], [string, string]> = {
  totalMinutes: ['minute', 'minutes'],
  singleSessionMinutes: ['minute', 'minutes'],
  uniqueDays: ['day', 'days'],
  streakDays: ['day', 'days'],
  sessionCount: ['stream', 'streams'],
};

export function Viewer() {
  const token = useMemo(() => tokenFromFragment(window.location.hash), []);
  if (!token) {
    return (
      <main class="viewer">
        <h1>Your rewards</h1>
        <div class="alert" role="alert">
          This page needs a player's token: open it with the link your game shows (it ends in{' '}
          <code>#token=…</code>).
        </div>
      </main>
    );
  }
  return <Challenges token={token} />;
}

function Challenges({ token }: { token: string }) {
  const http = useMemo(
    () => new HttpClient({ baseUrl: window.location.origin, token, fetch: browserFetch }),
    [token],
  );
  const [list, setList] = useState<Challenge[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [claims, setClaims] = useState<Record<string, Claim>>({});

  const refresh = useCallback(async () => {
    try {
      setList(await listChallenges(http));
      setError(null);
    } catch (err) {
      setError(describeFailure(err));
    }
  }, [http]);

  useEffect(() => {
    void refresh();
    const timer = setInterval(refresh, REFRESH_MS);
    const onVisible = () => {
      if (document.visibilityState === 'visible') void refresh();
    };
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      clearInterval(timer);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [refresh]);

  const onClaimed = (c: Claim, challengeId: string) => {
    setClaims((all) => ({ ...all, [challengeId]: c }));
    void refresh();
  };

  return (
    <main class="viewer">
      <h1>Your rewards</h1>
      {error ? (
        <div class="alert" role="alert">
          {error}
        </div>
      ) : null}
      {list === null && !error ? <p aria-busy="true">Loading your challenges…</p> : null}
      {list && list.length === 0 ? (
        <div class="empty">
          <p class="empty-title">No challenges right now.</p>
          <p>When your game runs a streaming campaign, its challenges show here with your progress.</p>
        </div>
      ) : null}
      <div class="challenges">
        {list?.map((c) => (
          <ChallengeCard
            key={c.challengeId}
            challenge={c}
            claim={claims[c.challengeId] ?? c.claim}
            http={http}
            token={token}
            onClaimed={(claim) => onClaimed(claim, c.challengeId)}
          />
        ))}
      </div>
    </main>
  );
}

/** The challenge's 200×200 image, fetched with the device token (an <img> cannot send it). */
function useChallengeImage(token: string, c: Challenge): string | null {
  const [url, setUrl] = useState<string | null>(null);
  const client = useMemo(
    () => createTenantClient({ baseUrl: window.location.origin, accessToken: token, fetch: browserFetch }),
    [token],
  );
  useEffect(() => {
    let objectUrl: string | null = null;
    let cancelled = false;
    void client
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
  }, [client, c.campaignId, c.challengeId, c.updatedAt]);
  return url;
}

function ChallengeCard({
  challenge: c,
  claim,
  http,
  token,
  onClaimed,
}: {
  challenge: Challenge;
  claim: Claim | null;
  http: HttpClient;
  token: string;
  onClaimed: (claim: Claim) => void;
}) {
  const image = useChallengeImage(token, c);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const titleId = `challenge-${c.challengeId}`;
  const { value, target } = c.progress;
  const [one, many] = UNITS[c.rule.type] ?? ['', ''];
  const unit = target === 1 ? one : many;
  // Past the target is simply done: the bar and its text stop at the target.
  const shown = Math.min(value, target);
  const complete = c.status === 'complete';
  const reached = c.status !== 'inProgress';

  const onClaim = async () => {
    setBusy(true);
    setError(null);
    try {
      onClaimed(await claimChallenge(http, c.challengeId));
    } catch (err) {
      setError(describeFailure(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <article class="challenge" aria-labelledby={titleId}>
      {image ? (
        <img src={image} alt={`Reward: ${c.rewardTitle}`} width={200} height={200} />
      ) : (
        <div class="placeholder" aria-hidden="true" />
      )}
      <div class="body">
        <h2 id={titleId}>{c.rewardTitle}</h2>
        <p class="requirement">{c.rewardRequirement}</p>
        <div
          class="progress"
          role="progressbar"
          aria-label={`Progress toward ${c.rewardTitle}`}
          aria-valuemin={0}
          aria-valuemax={target}
          aria-valuenow={shown}
          aria-valuetext={`${shown} of ${target} ${unit}${reached ? ', complete' : ''}`}
        >
          <div style={{ width: `${target > 0 ? (shown / target) * 100 : 0}%` }} />
        </div>
        <p class="progress-text">
          {shown} / {target} {unit}
          {complete ? ' — complete: claim your reward!' : ''}
        </p>
      </div>
      <div class="actions">
        {claim ? (
          <RedemptionView claim={claim} />
        ) : (
          <button type="button" disabled={!complete || busy} onClick={onClaim}>
            Claim
          </button>
        )}
        {error ? (
          <div class="alert" role="alert">
            {error}
          </div>
        ) : null}
      </div>
    </article>
  );
}

/** Links only to web and app URLs: never `javascript:`, `data:` and the like. */
function safeHref(url: string): string | undefined {
  try {
    const scheme = new URL(url).protocol;
    return ['javascript:', 'data:', 'vbscript:', 'file:', 'blob:'].includes(scheme) ? undefined : url;
  } catch {
    return undefined;
  }
}

function intentDescription(r: Extract<Redemption, { method: 'intent' }>): string {
  const target = r.activityName ? `${r.packageName}/${r.activityName}` : r.packageName;
  const parts = [`${r.form} ${target}`];
  if (r.action) parts.push(`action ${r.action}`);
  if (r.category) parts.push(`category ${r.category}`);
  if (r.flags != null) parts.push(`flags 0x${(r.flags >>> 0).toString(16)}`);
  parts.push(`data ${r.dataUrl}`);
  return parts.join(' · ');
}

function RedemptionView({ claim }: { claim: Claim }) {
  const r = claim.redemption;
  const onceClaimed = useRef(new Date(claim.claimedAt).toLocaleString());
  return (
    <div class="redemption">
      <p class="claimed">Claimed on {onceClaimed.current}</p>
      {r.method === 'displayCode' ? (
        <>
          <p>Your code</p>
          <p class="display-code">{r.code}</p>
          <p class="instructions">{r.instructions}</p>
        </>
      ) : null}
      {r.method === 'webUrl' ? (
        <p>
          <a class="button" href={safeHref(r.url)} target="_blank" rel="noopener noreferrer">
            Visit
          </a>
        </p>
      ) : null}
      {r.method === 'intent' ? (
        <>
          <p class="instructions">
            Your reward opens in the app <code>{r.packageName}</code>: {intentDescription(r)}
          </p>
          <p>
            <a class="button" href={safeHref(r.dataUrl)} target="_blank" rel="noopener noreferrer">
              Open in browser
            </a>
          </p>
        </>
      ) : null}
    </div>
  );
}
