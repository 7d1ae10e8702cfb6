// `gpuhost config-doc [--write]`: prints docs/configuration.md as rendered from the stack-config
// schema (stack/config-doc.ts), or writes it there.
import * as fs from "node:fs";
import * as path from "node:path";
import { renderConfigDoc } from "../stack/config-doc";
import { projectRoot } from "../project-files";
import { defaultIo, EXIT, runCommand, type CliIo } from "./common";
import type { CommandSpec } from "./options";

export function configDocPath(): string {
  return path.join(projectRoot(), "docs", "configuration.md");
}

export const CONFIG_DOC = {
  name: "config-doc",
  about: "Prints docs/configuration.md as rendered from the stack-config schema; --write writes it there.",
  flags: { write: { type: "boolean", description: "write docs/configuration.md instead of printing it" } },
  exits: [
    [EXIT.ok, "ok"],
    [EXIT.usage, "usage"],
  ],
} as const satisfies CommandSpec;

export function configDocMain(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  return runCommand(CONFIG_DOC, argv, io, async (values) => {
    if (values.write) {
      fs.writeFileSync(configDocPath(), renderConfigDoc());
      io.stdout.write(`wrote ${configDocPath()}\n`);
    } else io.stdout.write(renderConfigDoc());
    return EXIT.ok;
  });
}

if (require.main === module) {
  void configDocMain(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
