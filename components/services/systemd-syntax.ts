/**
 * systemd's unit-file value syntax, so that no configured value can change what a unit says.
 *
 * systemd splits ExecStart= into words itself (no shell is involved): whitespace separates words,
 * double quotes group them, C escapes (\n, \\, \") are decoded inside, `%x` is a specifier and
 * `$VAR` / `${VAR}` are environment substitutions (systemd.service(5) "COMMAND LINES",
 * systemd.unit(5) "SPECIFIERS"). A value is therefore safe when it is double-quoted with `\` and `"`
 * escaped, `%` doubled and `$` doubled, and control characters C-escaped (a raw newline would end
 * the directive and start a new one).
 */

/**
 * One word of a command line: a literal, a reference systemd expands from the unit's environment,
 * or the path of one of the unit's credentials (LoadCredential=), `%d/<name>`: the private folder
 * systemd copies the credential into, readable by the service's user only.
 */
export type ExecWord = string | { readonly env: string } | { readonly credential: string };

const CREDENTIAL_NAME = /^[A-Za-z0-9_.-]+$/;

/** A credential id as LoadCredential= and `%d/<id>` take it. */
export function credentialName(name: string): string {
  if (!CREDENTIAL_NAME.test(name) || name === "." || name === "..")
    throw new Error(`not a credential name: ${JSON.stringify(name)}`);
  return name;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Characters that never need quoting in a systemd word (none is special to systemd's parser). */
const PLAIN_WORD = /^[A-Za-z0-9_./:=,+@-]+$/;

function cEscape(value: string, opts: { dollar: boolean }): string {
  let out = "";
  for (const ch of value) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === "\\") out += "\\\\";
    else if (ch === '"') out += '\\"';
    else if (ch === "%") out += "%%";
    else if (ch === "$" && opts.dollar) out += "$$";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\t") out += "\\t";
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return out;
}

/** One command-line word as systemd reads it back unchanged (after its own `$$` -> `$`). */
export function quoteExecWord(word: ExecWord): string {
  if (typeof word !== "string" && "credential" in word) return `%d/${credentialName(word.credential)}`;
  if (typeof word !== "string") {
    if (!ENV_NAME.test(word.env)) throw new Error(`not an environment variable name: ${JSON.stringify(word.env)}`);
    // ${NAME} (braces) expands to exactly one word, whatever the value holds.
    return `\${${word.env}}`;
  }
  if (PLAIN_WORD.test(word)) return word;
  return `"${cEscape(word, { dollar: true })}"`;
}

/** A whole ExecStart= value; the first word is the program and must be an absolute path. */
export function renderExecLine(words: readonly ExecWord[]): string {
  const [program] = words;
  if (typeof program !== "string" || !program.startsWith("/")) {
    throw new Error(`ExecStart program must be an absolute path, got ${JSON.stringify(program)}`);
  }
  // A program path starting with one of systemd's prefix characters (-@:+!) would change how it
  // runs; an absolute path cannot, since it starts with "/".
  return words.map(quoteExecWord).join(" ");
}

/** One Environment= assignment; systemd does not expand `$` there, but does expand `%`. */
export function quoteEnvironmentAssignment(name: string, value: string): string {
  if (!ENV_NAME.test(name)) throw new Error(`not an environment variable name: ${JSON.stringify(name)}`);
  return `"${name}=${cEscape(value, { dollar: false })}"`;
}

/**
 * A path for directives that take a bare path (WorkingDirectory=, EnvironmentFile=). These are not
 * unquoted by systemd, so the path is restricted instead of escaped.
 */
export function unitPath(field: string, value: string): string {
  if (!/^\/[A-Za-z0-9._+@/-]*$/.test(value) || value.split("/").includes("..")) {
    throw new Error(`${field} must be an absolute path of letters, digits and ._+@-/ (got ${JSON.stringify(value)})`);
  }
  return value;
}

/** Free text on one line (Description=): control characters removed, `%` doubled. */
export function unitText(value: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are what this removes
  return value.replace(/[\u0000-\u001f\u007f]/g, " ").replace(/%/g, "%%");
}
