package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildPoints builds examples/points into a new temporary folder. It returns the binary's
// path and a func that removes the folder. Call it from TestMain; it exits the process with
// a message if the build fails.
func BuildPoints() (bin string, cleanup func()) {
	dir, err := os.MkdirTemp("", "eosink-points")
	if err != nil {
		fmt.Fprintln(os.Stderr, "building examples/points:", err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "points")
	build := exec.Command("go", "build", "-o", bin, "github.com/eosink/eosink/examples/points")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "building examples/points:", err)
		os.Exit(1)
	}
	return bin, func() { os.RemoveAll(dir) }
}
