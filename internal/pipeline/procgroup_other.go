//go:build !unix

package pipeline

import "os/exec"

// setProcessGroup is a no-op where process groups do not exist; the
// default cancellation kills the process itself.
func setProcessGroup(cmd *exec.Cmd) {}
