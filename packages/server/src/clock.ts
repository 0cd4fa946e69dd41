/** The server's notion of time. Production uses the system clock; tests may inject their own. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
