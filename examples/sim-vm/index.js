// A program of another team that depends on gpuhost (package.json: "gpuhost": "file:../..", or a packed
// tarball) and composes it with its own resources. A local command stands in for the resource that
// makes a VM: it creates the machine (here: the folder a simulated host lives in) and reports where it
// is. That output, known only once the VM exists, feeds GpuServingHost like any Pulumi Input; a cloud
// VM's public IP would go into `connectedPlatform({ kind: "ssh", host: vm.publicIp, ... })` the same way.
// Plain JavaScript, so the example runs without a compile step; gpuhost ships its types for TypeScript.
const pulumi = require("@pulumi/pulumi");
const command = require("@pulumi/command");
const { GpuServingHost, loadConfig, simulatedPlatform } = require("gpuhost");

// the stack's `gpuhost:*` config, validated by gpuhost's schema (hosts, services, simulator, ...)
const { config, apiKey } = loadConfig();
const host = config.hosts[0];

const vm = new command.local.Command("vm", {
  create: 'mkdir -p .gpuhost/vms/vm-1 && printf %s "$PWD/.gpuhost/vms/vm-1"',
  delete: "rm -rf .gpuhost/vms/vm-1",
});

const gpu = new GpuServingHost("gpu", {
  host,
  platform: simulatedPlatform(vm.stdout, config.simulator),
  config,
  apiKey,
});

exports.vmAddress = vm.stdout;
exports.endpoint = gpu.endpoint;
exports.generating = gpu.verification.generating;
exports.sustainedOutputTokensPerSecond = gpu.verification.sustainedOutputTokensPerSecond;
