#!/usr/bin/env node
// The `liveline` command: the CLI is TypeScript, run through tsx without a build step.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
