// Shared by the simulated host's shims. The root folder comes from GPUHOST_ROOT and must be set:
// a shim never touches the machine's real /.
"use strict";
const path = require("node:path");

function root() {
  const r = process.env.GPUHOST_ROOT;
  if (!r || path.resolve(r) === "/") {
    console.error("gpuhost simulated host: GPUHOST_ROOT must name the simulated root folder (refusing the real /)");
    process.exit(2);
  }
  return path.resolve(r);
}

/** The real path of a host path on the simulated host. */
function hostPath(p) {
  return path.join(root(), p);
}

/** The host path of a real path under the root (inverse of hostPath). */
function fromHostPath(real) {
  const r = root();
  return real === r ? "/" : real.startsWith(`${r}/`) ? real.slice(r.length) : real;
}

function fail(message, code) {
  console.error(message);
  process.exit(code);
}

/** Debian control/status stanzas (Key: value, blank-line separated). */
function parseStanzas(text) {
  return text
    .split(/\n\s*\n/)
    .map((block) => {
      const s = {};
      for (const line of block.split("\n")) {
        const m = /^([A-Za-z0-9-]+):\s*(.*)$/.exec(line);
        if (m) s[m[1]] = m[2];
      }
      return s;
    })
    .filter((s) => s.Package);
}

function stanzaText(s) {
  return `${Object.entries(s).map(([k, v]) => `${k}: ${v}`).join("\n")}\n`;
}

module.exports = { root, hostPath, fromHostPath, fail, parseStanzas, stanzaText };
