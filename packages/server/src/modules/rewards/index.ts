// The face of the rewards module: everything outside it imports from here only.
export type { CampaignsService } from './campaigns.ts';
export type { ChallengesService } from './challenges.ts';
export type { ClaimCodes, ClaimsService } from './claims.ts';
export type { DeviceChallenges } from './device.ts';
export type { ChallengeImport } from './import.ts';
export { createRewards, type Rewards, type RewardsDeps, type TenantDirectory } from './rewards.ts';
export { type RewardsPluginOptions, rewardsPlugin } from './routes/plugin.ts';
export type { Standings, StreamIntervals } from './standing.ts';
export type { Verification, VerifyService } from './verify.ts';
