package testbed

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/eosink/eosink/internal/failpoint"
)

// Build builds the main packages pkgs (import paths) into a new temporary folder, each
// binary named after its package's last path element, with the failpoints build tag: tests
// inject faults into these processes through failpoint.EnvVar. It returns the folder and a
// func that removes it. Call it from TestMain; it exits the process with a message if the
// build fails or a binary has no failpoints.
func Build(pkgs ...string) (dir string, cleanup func()) {
	dir, err := os.MkdirTemp("", "eosink-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	build := exec.Command("go", append([]string{"build", "-tags", "failpoints", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "build", pkgs, err)
		os.Exit(1)
	}
	if err := checkFailpoints(dir, pkgs); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "build", pkgs, err)
		os.Exit(1)
	}
	return dir, func() { os.RemoveAll(dir) }
}

// checkFailpoints makes sure that each binary of pkgs that links package failpoint reads
// failpoint.EnvVar, so that a test injecting a fault cannot pass without the fault.
func checkFailpoints(dir string, pkgs []string) error {
	const fp = "github.com/eosink/eosink/internal/failpoint"
	out, err := exec.Command("go", append([]string{"list", "-tags", "failpoints", "-f", `{{.ImportPath}} {{join .Deps " "}}`}, pkgs...)...).Output()
	if err != nil {
		return fmt.Errorf("go list: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !slices.Contains(f[1:], fp) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, path.Base(f[0])))
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte(failpoint.EnvVar)) {
			return fmt.Errorf("%s was built without failpoints (the failpoints build tag)", f[0])
		}
	}
	return nil
}
