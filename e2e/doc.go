// Package e2e holds end-to-end tests that run the real switchboard binary
// or real third-party clients against a live hub: crash_test.go kills the
// hub with SIGKILL in the middle of its work and starts it again on the same
// data; clients_test.go runs the official A2A and MCP clients from the npm
// registry (pinned in clients/package-lock.json) against it. It has no code
// of its own.
package e2e
