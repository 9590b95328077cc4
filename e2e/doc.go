// Package e2e holds end-to-end tests that run the real switchboard binary
// as a separate process, so they can do what an in-process test cannot:
// kill the hub with SIGKILL in the middle of its work and start it again on
// the same data. It has no code of its own; see crash_test.go.
package e2e
