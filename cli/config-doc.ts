// `gpuhost config-doc [--write]`: prints docs/configuration.md as rendered from the stack-config
// schema (components/config-doc.ts), or writes it there.
import * as fs from "node:fs";
import * as path from "node:path";
import { renderConfigDoc } from "../components/config-doc";
import { projectRoot } from "../project-files";

export function configDocPath(): string {
  return path.join(projectRoot(), "docs", "configuration.md");
}

export async function configDocMain(argv: string[]): Promise<number> {
  const unknown = argv.filter((a) => a !== "--write");
  if (unknown.length > 0) {
    process.stderr.write(
      `gpuhost config-doc: unexpected argument ${JSON.stringify(unknown[0])}\nusage: gpuhost config-doc [--write]\n`,
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
