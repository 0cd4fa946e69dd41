import { runCli } from './program.ts';

await runCli();
