package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildPoints builds examples/points into dir and returns the binary's path.
func BuildPoints(dir string) (string, error) {
	bin := filepath.Join(dir, "points")
	build := exec.Command("go", "build", "-o", bin, "github.com/eosink/eosink/examples/points")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building examples/points: %w", err)
	}
	return bin, nil
}
