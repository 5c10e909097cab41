package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Build builds the main packages pkgs (import paths) into a new temporary folder, each
// binary named after its package's last path element. It returns the folder and a func that
// removes it. Call it from TestMain; it exits the process with a message if the build fails.
func Build(pkgs ...string) (dir string, cleanup func()) {
	dir, err := os.MkdirTemp("", "eosink-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	build := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "build", pkgs, err)
		os.Exit(1)
	}
	return dir, func() { os.RemoveAll(dir) }
}

// BuildPoints builds examples/points (see Build) and returns the binary's path.
func BuildPoints() (bin string, cleanup func()) {
	dir, cleanup := Build("github.com/eosink/eosink/examples/points")
	return filepath.Join(dir, "points"), cleanup
}
