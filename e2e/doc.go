// Package e2e holds end-to-end tests that drive the hub from outside:
// crash_test.go runs the real switchboard binary as a separate process, so
// it can do what an in-process test cannot — kill the hub with SIGKILL in
// the middle of its work and start it again on the same data — and
// console_test.go drives the web console in headless Chromium (with the
// playwright-core script in console/). It has no code of its own.
package e2e
