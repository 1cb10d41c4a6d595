package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/alecthomas/kong"
)

// versionFlag is --version: print versionLine and exit 0, whatever else the
// command line says.
type versionFlag bool

// BeforeReset prints the version before kong resolves or checks anything
// else, so that --version works without a command.
func (versionFlag) BeforeReset(app *kong.Kong) error {
	fmt.Fprintln(app.Stdout, "flakeid "+versionLine())
	app.Exit(exitOK)
	return nil
}

// versionLine describes the build from its build info:
// "v1.2.3 (commit 0123456789ab dirty, go1.26.0)". The version is the main
// module's ("devel" for a build from a checkout, which Go calls
// "(devel)"); the commit is the first 12 hex digits of vcs.revision,
// followed by "dirty" when vcs.modified says the tree had changes, and is
// left out when the build has no VCS information (go run, go test, a build
// with -buildvcs=false).
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return versionOf(bi)
}

// versionOf is versionLine of the build info bi (nil when there is none).
func versionOf(bi *debug.BuildInfo) string {
	version, commit := "devel", ""
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			version = v
		}
		var rev string
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			commit = "commit " + rev[:min(len(rev), 12)]
			if dirty {
				commit += " dirty"
			}
			commit += ", "
		}
	}
	goVersion := runtime.Version()
	if bi != nil && bi.GoVersion != "" {
		goVersion = bi.GoVersion
	}
	return fmt.Sprintf("%s (%s%s)", version, commit, goVersion)
}
