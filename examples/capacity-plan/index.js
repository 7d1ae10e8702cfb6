// Another stack's capacity plan, the Pulumi way: it reads a gpuhost host stack's outputs through
// StackReference (no copy of a figure by hand) and exports, per host and service, the hosts a job
// needs by its deadline. A fleet stack takes its host count from here:
//   pulumi config set hostStack organization/gpuhost/story
//   pulumi up   ->   pulumi stack output plan --json
// then size the fleet stack's `hosts` to the recommended service's hostsForDeadline.
"use strict";
const pulumi = require("@pulumi/pulumi");
const { hostsForJob } = require("gpuhost");

const config = new pulumi.Config();
const hosts = new pulumi.StackReference(config.require("hostStack")).requireOutput("gpuHosts");
const job = {
  completions: config.getNumber("completions") ?? 900000,
  outputTokensPerCompletion: config.getNumber("outputTokensPerCompletion") ?? 2000,
  deadlineDays: config.getNumber("deadlineDays") ?? 7,
};

exports.job = job;
exports.plan = hosts.apply((h) => hostsForJob(h, job));
