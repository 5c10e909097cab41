// Package ui is the console's web page: a dependency-free HTML page, script and style sheet,
// embedded in the binary (no CDN, no build step). The page reads and changes what the
// management API under /api/v1 serves, and puts every value into the page as text.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is the page's policy: its own script and style only (no inline
// script or style, no eval), requests to its own origin only, no frames, no forms posted
// elsewhere, no plugins.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// Handler serves the page at / and its files under /ui/ (GET and HEAD only), each with
// ContentSecurityPolicy. Any other path is next's.
func Handler(next http.Handler) http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/ui/", http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page := r.URL.Path == "/" || r.URL.Path == "/index.html"
		asset := len(r.URL.Path) > len("/ui/") && r.URL.Path[:len("/ui/")] == "/ui/"
		if (!page && !asset) || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Security-Policy", ContentSecurityPolicy)
		if page {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			b, _ := fs.ReadFile(sub, "index.html")
			_, _ = w.Write(b)
			return
		}
		files.ServeHTTP(w, r)
	})
}
