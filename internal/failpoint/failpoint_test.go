//go:build failpoints

package failpoint

import "testing"

func TestLoadParses(t *testing.T) {
	t.Cleanup(func() { _ = Load("") })
	if err := Load("after-commit=kill@3, in-handler=sleep(10ms),x=exit(7)"); err != nil {
		t.Fatal(err)
	}
	m := *points.Load()
	if a := m["after-commit"]; a.kind != "kill" || a.nth != 3 {
		t.Fatalf("after-commit = %+v", a)
	}
	if a := m["in-handler"]; a.kind != "sleep" || a.dur.Milliseconds() != 10 {
		t.Fatalf("in-handler = %+v", a)
	}
	if a := m["x"]; a.kind != "exit" || a.code != 7 {
		t.Fatalf("x = %+v", a)
	}
}

func TestLoadRejects(t *testing.T) {
	t.Cleanup(func() { _ = Load("") })
	for _, bad := range []string{"nope", "a=boom", "a=kill@0", "a=sleep(forever)", "=kill"} {
		if err := Load(bad); err == nil {
			t.Errorf("Load(%q) succeeded, want error", bad)
		}
	}
}

func TestEvalCountsAndFiresOnNth(t *testing.T) {
	t.Cleanup(func() { _ = Load("") })
	if err := Load("p=sleep(1ns)@2"); err != nil {
		t.Fatal(err)
	}
	Eval("p")
	Eval("other")
	Eval("p")
	if got := (*points.Load())["p"].count.Load(); got != 2 {
		t.Fatalf("count = %d, want 2", got)
	}
}
