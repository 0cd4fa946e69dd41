import fs from 'node:fs';
import { Command, CommanderError } from 'commander';
import { registerAdmin } from './admin.ts';
import { CliError } from './errors.ts';
import { registerOpenapi } from './openapi.ts';
import { registerSim } from './sim.ts';
import { registerStart } from './start.ts';
import { registerTail } from './tail.ts';

function version(): string {
  const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

/** The `liveline` command. Each group of subcommands registers itself; `sim` and `demo` will join them. */
export function buildProgram(): Command {
  const program = new Command('liveline')
    .description(
      'liveline: realtime commands, sessions and events between tenant backends and VR headset apps',
    )
    .version(version())
    .showHelpAfterError()
    .exitOverride();
  registerStart(program);
  registerAdmin(program);
  registerSim(program);
  registerTail(program);
  registerOpenapi(program);
  return program;
}

/** Runs the CLI; failures print `code: detail` on stderr and set exit code 1. */
export async function runCli(argv: string[] = process.argv): Promise<void> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // Commander already printed help, the version or the usage error.
      process.exitCode = err.exitCode;
      return;
    }
    if (err instanceof CliError) {
      process.stderr.write(`${err.code}: ${err.message}\n`);
    } else {
      process.stderr.write(`internal: ${err instanceof Error ? err.message : String(err)}\n`);
    }
    process.exitCode = 1;
  }
}
