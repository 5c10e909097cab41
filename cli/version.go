package cli

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// modulePath is eosink's module; a custom binary built on cli.Main has it as a dependency.
const modulePath = "github.com/eosink/eosink"

// Version describes the running binary.
type Version struct {
	Module     string // eosink's module version: v1.2.3, a pseudo-version, or "(devel)" for a build from a checkout
	Commit     string // vcs.revision of the build, "" when the build did not record one (go install from the module cache)
	Modified   bool   // vcs.modified: the checkout had uncommitted changes
	Go         string // runtime.Version()
	Librdkafka string // kafka.LibraryVersion(), the librdkafka linked in
}

// BuildVersion reads the binary's build information.
func BuildVersion() Version {
	v := versionOf(debug.ReadBuildInfo())
	_, v.Librdkafka = kafka.LibraryVersion()
	return v
}

// versionOf reads eosink's module version and commit from a binary's build information.
func versionOf(bi *debug.BuildInfo, ok bool) Version {
	v := Version{Module: "unknown", Go: runtime.Version()}
	if !ok {
		return v
	}
	if bi.Main.Path == modulePath {
		v.Module = bi.Main.Version
	} else {
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				if d.Replace != nil {
					d = d.Replace
				}
				v.Module = d.Version
			}
		}
	}
	// vcs.* describe the main module's checkout: eosink's own only when it is the main module.
	if bi.Main.Path == modulePath {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

// versionCmd: eosink version.
func versionCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eosink version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	h := help{usage: "eosink version [-json]", desc: "Print eosink's module version, the commit it was built from, the Go version and the librdkafka version."}
	fs.Usage = func() { h.print(fs.Output(), fs) }
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("version: unexpected arguments %v", fs.Args())}
	}
	v := BuildVersion()
	if *asJSON {
		return writeJSON(stdout, struct {
			Module     string `json:"module"`
			Commit     string `json:"commit"`
			Modified   bool   `json:"modified"`
			Go         string `json:"go"`
			Librdkafka string `json:"librdkafka"`
		}{v.Module, v.Commit, v.Modified, v.Go, v.Librdkafka})
	}
	commit := v.Commit
	switch {
	case commit == "":
		commit = "unknown (not recorded by this build)"
	case v.Modified:
		commit += " (modified)"
	}
	_, err := fmt.Fprintf(stdout, "eosink %s\ncommit:     %s\ngo:         %s\nlibrdkafka: %s\n", v.Module, commit, v.Go, v.Librdkafka)
	return err
}
