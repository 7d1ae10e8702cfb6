/**
 * How long a configured text may be where it reaches a host: a unit file, a script's argument, a
 * command line. Unbounded, a long value passed preview and then failed `up` in the kernel (`spawn
 * E2BIG`: one argument may be at most 128 KiB, and a unit file travels base64-encoded as one), so the
 * schemas refuse it at its config path instead. The bounds are the system's own where it has one.
 */

/** Linux PATH_MAX: no longer path can be opened. */
export const PATH_MAX_CHARS = 4096;
/** Linux NAME_MAX: one file name (a profile's). */
export const NAME_MAX_CHARS = 255;
/** What browsers, proxies and pip's index URLs stay within in practice. */
export const URL_MAX_CHARS = 2048;
/** A package version (PEP 440 with a local label, a Debian version, a distribution name). */
export const VERSION_MAX_CHARS = 128;

/** The message of a `.max(n, ...)` on text that reaches the host. */
export const atMostChars = (max: number): string =>
  `must be at most ${max} characters (it reaches a unit file or a command line on the host)`;
