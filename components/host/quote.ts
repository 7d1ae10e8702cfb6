// POSIX shell quoting. Every value that reaches a shell goes through shellQuote: a value becomes
// one word, whatever it contains (spaces, quotes, `;`, `$(...)`, newlines), because inside single
// quotes the shell interprets nothing and a single quote itself is written as '\''.
// No Pulumi import: exec.ts (loaded by dynamic providers from dist/) uses it too.

const SAFE_WORD = /^[A-Za-z0-9_@%+=:,./-]+$/;

/** Quote one value as a single shell word. Plain words stay readable; the rest are single-quoted. */
export function shellQuote(value: string): string {
  if (value.includes("\0")) throw new Error("a shell word cannot contain a NUL byte");
  if (value !== "" && SAFE_WORD.test(value)) return value;
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** Quote each value and join them with spaces: an argument list for a shell command line. */
export function shellJoin(values: readonly string[]): string {
  return values.map(shellQuote).join(" ");
}

/** `NAME=value` assignments for `env`, with names checked (a name is never quoted, so it must be safe). */
export function envAssignments(environment: Readonly<Record<string, string>>): string[] {
  return Object.keys(environment)
    .sort()
    .map((name) => {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
        throw new Error(`invalid environment variable name ${JSON.stringify(name)}`);
      return `${name}=${shellQuote(environment[name])}`;
    });
}
