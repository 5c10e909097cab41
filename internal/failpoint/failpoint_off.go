//go:build !failpoints

package failpoint

import (
	"errors"
	"strings"
)

// Load accepts only an empty spec: this build has no failpoints (see the package doc).
func Load(spec string) error {
	if strings.TrimSpace(spec) == "" {
		return nil
	}
	return errors.New("failpoints are not compiled in: build with -tags failpoints")
}

// Eval does nothing: this build has no failpoints.
func Eval(string) {}
