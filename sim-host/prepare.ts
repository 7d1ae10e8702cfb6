// Run by scripts/prepare.sh at `pulumi up`, never while the program is evaluated (so `pulumi
// preview` writes nothing): lays out the simulated host under GPUHOST_ROOT.
import { root } from "./common";
import { prepareSimulatedHost } from "./platform";

prepareSimulatedHost(root());
process.stdout.write(`prepared=${root()}\n`);
