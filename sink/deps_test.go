package sink

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestNoYAMLDependency: a program that uses package sink with a Handler does not link a YAML
// package. Pipeline config files and the plugin registry (package sink/plugin) are the only
// users of YAML, and package sink must not import them, directly or through another package.
func TestNoYAMLDependency(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go") // the toolchain that built this test
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to list package sink's dependencies: %v", err)
		}
	}
	for _, tags := range []string{"", "failpoints"} {
		out, err := exec.Command(goBin, "list", "-tags", tags, "-deps", ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -tags %q -deps: %v\n%s", tags, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 || deps[len(deps)-1] != "github.com/eosink/eosink/sink" {
			t.Fatalf("go list -tags %q -deps printed no dependency list of package sink:\n%s", tags, out)
		}
		for _, dep := range deps {
			if strings.Contains(strings.ToLower(dep), "yaml") {
				t.Errorf("package sink (tags %q) depends on %s; keep YAML in sink/plugin and the cli", tags, dep)
			}
		}
	}
}
