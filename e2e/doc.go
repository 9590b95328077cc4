// Package e2e holds end-to-end tests that drive the hub from outside:
// crash_test.go runs the real switchboard binary as a separate process and
// kills it with SIGKILL in the middle of its work, then starts it again on
// the same data; clients_test.go runs the official A2A and MCP clients from
// the npm registry (pinned in clients/package-lock.json) against a live hub;
// console_test.go drives the web console in headless Chromium (with the
// playwright-core script in console/). It has no code of its own.
package e2e
