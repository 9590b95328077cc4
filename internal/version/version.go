// Package version reports what build of Switchboard is running. Release
// builds set Version and Commit with -ldflags; development builds fall back
// to the module build information.
package version

import (
	"runtime"
	"runtime/debug"
)

// Set at build time: -ldflags "-X github.com/switchboard-hub/switchboard/internal/version.Version=v1.2.3 -X ...Commit=abc".
var (
	Version = "dev"
	Commit  = ""
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
}

// Get returns the build information.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && i.Commit == "" {
				i.Commit = s.Value
			}
		}
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}
