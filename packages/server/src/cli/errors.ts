/** A failure the CLI reports as `code: detail` on stderr, exiting 1. */
export class CliError extends Error {
  constructor(
    readonly code: string,
    detail: string,
  ) {
    super(detail);
    this.name = 'CliError';
  }
}
