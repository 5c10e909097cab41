package pipeline

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestSinkAliasExpansionIsBounded: anchors and aliases that expand exponentially
// (billion laughs) in the sink section, or inside a merge, fail fast with a clear error
// instead of taking seconds and gigabytes.
func TestSinkAliasExpansionIsBounded(t *testing.T) {
	laughs := `
  a: &a [x, x, x, x, x, x, x, x, x, x]
  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
  g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
  h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
`
	merges := `
  m1: &m1 {k1: v, k2: v, k3: v, k4: v, k5: v, k6: v, k7: v, k8: v, k9: v}
  m2: &m2 {a: *m1, b: *m1, c: *m1, d: *m1, e: *m1, f: *m1, g: *m1, h: *m1, i: *m1, j: *m1}
  m3: &m3 {a: *m2, b: *m2, c: *m2, d: *m2, e: *m2, f: *m2, g: *m2, h: *m2, i: *m2, j: *m2}
  m4: &m4 {a: *m3, b: *m3, c: *m3, d: *m3, e: *m3, f: *m3, g: *m3, h: *m3, i: *m3, j: *m3}
  m5: &m5 {a: *m4, b: *m4, c: *m4, d: *m4, e: *m4, f: *m4, g: *m4, h: *m4, i: *m4, j: *m4}
  m6: &m6 {a: *m5, b: *m5, c: *m5, d: *m5, e: *m5, f: *m5, g: *m5, h: *m5, i: *m5, j: *m5}
  m7: &m7 {a: *m6, b: *m6, c: *m6, d: *m6, e: *m6, f: *m6, g: *m6, h: *m6, i: *m6, j: *m6}
  nested:
    <<: [*m7, *m7, *m7]
`
	for name, body := range map[string]string{"lists": laughs, "mappings and merges": merges} {
		file := minimal + body
		start := time.Now()
		_, err := Parse("laughs.yaml", []byte(file), Options{LogOutput: io.Discard})
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("%s: took %v", name, d)
		}
		if err == nil || !strings.Contains(err.Error(), "sink") || !strings.Contains(err.Error(), "aliases") {
			t.Errorf("%s: err = %v; want an error about the sink section's aliases", name, err)
		}
		if err != nil && strings.Count(err.Error(), "\n") > 2 {
			t.Errorf("%s: one error expected, got:\n%v", name, err)
		}
	}
}
