package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBinary builds the eosink command and runs it as a user does: the exit codes are the
// process's own.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "eosink")
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.Command(goCmd, "build", "-buildvcs=auto", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%v: %v", args, err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errb.String()
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"version"}, 0, "librdkafka: "},
		{[]string{"run", "-h"}, 0, "usage: eosink run -config FILE"},
		{[]string{"offsets", "list", "-h"}, 0, "usage: eosink offsets list"},
		{[]string{"--help"}, 0, "usage: eosink <command>"},
		{[]string{"run"}, 2, "-config is required"},
	} {
		code, out, errOut := run(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("eosink %v: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
		if c.code == 0 && errOut != "" {
			t.Errorf("eosink %v wrote to standard error: %q", c.args, errOut)
		}
	}

	// The version reads the binary's build information: the commit Go stamped into it, if any
	// (a build from a git checkout with -buildvcs; not from a git worktree, nor go install
	// from the module cache), else "unknown".
	_, out, _ := run("version")
	info, err := exec.Command(goCmd, "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	module, commit := "", "unknown (not recorded by this build)"
	for _, line := range strings.Split(string(info), "\n") {
		f := strings.Split(strings.TrimSpace(line), "\t")
		switch {
		case len(f) >= 3 && f[0] == "mod" && f[1] == "github.com/eosink/eosink":
			module = f[2] // (devel), or a pseudo-version Go derives from the commit
		case len(f) == 2 && strings.HasPrefix(f[1], "vcs.revision="):
			commit = strings.TrimPrefix(f[1], "vcs.revision=")
		}
	}
	if module == "" || !strings.HasPrefix(out, "eosink "+module+"\n") || !strings.Contains(out, "\ncommit:     "+commit) {
		t.Errorf("eosink version:\n%s\nwant module %q and commit %q (go version -m:\n%s)", out, module, commit, info)
	}
}
