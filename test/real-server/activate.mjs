// `gpuhost compare --activate-command` for the real-server test: asks the test's control endpoint
// (the URL, with the unit in its path) to make that service the running one, as
// `ssh HOST systemctl start UNIT` would on a host. Exits non-zero when the control endpoint refuses.
const res = await fetch(process.argv[2], { method: "POST" });
process.stdout.write(await res.text());
process.exit(res.ok ? 0 : 1);
