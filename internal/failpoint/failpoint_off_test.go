//go:build !failpoints

package failpoint

import "testing"

func TestOffBuildRefusesFailpoints(t *testing.T) {
	if err := Load(""); err != nil {
		t.Fatalf("Load(\"\") = %v, want nil", err)
	}
	if err := Load("after-commit=kill"); err == nil {
		t.Fatal("Load of a failpoint succeeded in a build without the failpoints tag")
	}
	Eval(AfterCommit) // a no-op: the test survives
}
