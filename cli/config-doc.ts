// `gpuhost config-doc [--write]`: prints docs/configuration.md as rendered from the stack-config
// schema (stack/config-doc.ts), or writes it there.
import * as fs from "node:fs";
import * as path from "node:path";
import { renderConfigDoc } from "../stack/config-doc";
import { projectRoot } from "../project-files";

export function configDocPath(): string {
  return path.join(projectRoot(), "docs", "configuration.md");
}

const USAGE = `usage: gpuhost config-doc [--write]

Prints docs/configuration.md as rendered from the stack-config schema; --write writes it there.`;

export async function configDocMain(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const unknown = argv.filter((a) => a !== "--write");
  if (unknown.length > 0) {
    process.stderr.write(
      `gpuhost config-doc: unexpected argument ${JSON.stringify(unknown[0])}\n${USAGE.split("\n")[0]}\n`,
    );
    return 2;
  }
  if (argv.includes("--write")) {
    fs.writeFileSync(configDocPath(), renderConfigDoc());
    process.stdout.write(`wrote ${configDocPath()}\n`);
  } else {
    process.stdout.write(renderConfigDoc());
  }
  return 0;
}

if (require.main === module) {
  void configDocMain(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
