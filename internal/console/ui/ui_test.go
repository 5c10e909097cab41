package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// The page and its files are served with the self-only policy; the folder is not listed;
// and nothing in them needs what the policy forbids: no inline script, no inline style, no
// event-handler attributes, no innerHTML or eval in the script.
func TestPageAndFiles(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", Page())
	mux.Handle("GET /ui/", Files())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) (int, string, http.Header) {
		t.Helper()
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, string(b), res.Header
	}
	code, page, h := get("/")
	if code != 200 || h.Get("Content-Security-Policy") != ContentSecurityPolicy || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("/: %d %v", code, h)
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>[^<]*</script>`).FindAllString(page, -1) {
		if !strings.Contains(tag, ` src="/ui/`) || !strings.HasSuffix(tag, "></script>") {
			t.Fatalf("an inline script in the page: %q", tag)
		}
	}
	if n := strings.Count(page, "<script"); n != 1 {
		t.Fatalf("%d script tags, want the one of console.js", n)
	}
	if m := regexp.MustCompile(`\sstyle=|\son[a-z]+=|<style`).FindString(page); m != "" {
		t.Fatalf("the page holds what its policy forbids: %q", m)
	}
	for _, f := range []string{"/ui/console.js", "/ui/console.css"} {
		code, body, h := get(f)
		if code != 200 || h.Get("Content-Security-Policy") != ContentSecurityPolicy || len(body) < 100 {
			t.Fatalf("%s: %d, %d bytes, %v", f, code, len(body), h)
		}
		if f == "/ui/console.js" {
			for _, bad := range []string{".innerHTML", "outerHTML", "insertAdjacentHTML", "eval(", "new Function", "document.write", "alert(", "confirm(", "prompt("} {
				if strings.Contains(body, bad) {
					t.Errorf("console.js uses %s", bad)
				}
			}
		}
	}
	if code, _, _ := get("/ui/"); code != 404 {
		t.Fatalf("/ui/ lists the folder: %d", code)
	}
}
