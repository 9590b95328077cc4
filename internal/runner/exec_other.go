//go:build !unix

package runner

import "os/exec"

// killGroup is a no-op where process groups are not available: the
// default cancellation kills the shell only.
func killGroup(cmd *exec.Cmd) {}
