export { rewardsRoutes } from './routes.ts';
