/**
 * A command's flags written as an object, for the tests that call the commands as functions: keys in
 * camelCase become `--kebab-case` flags, in the object's order, each followed by its value.
 */
export function cliFlags(options: Record<string, string>): string[] {
  return Object.entries(options).flatMap(([key, value]) => [
    `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`,
    value,
  ]);
}
