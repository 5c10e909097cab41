// Package ui is the console's web page: a dependency-free HTML page, script and style sheet,
// embedded in the binary (no CDN, no build step). The page reads and changes what the
// management API under /api/v1 serves, and puts every value into the page as text.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is the page's policy: its own script and style only (no inline
// script or style, no eval), requests to its own origin only, no frames, no forms posted
// elsewhere, no plugins.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// Page serves the page (index.html) with ContentSecurityPolicy, which replaces the API's.
func Page() http.Handler {
	page, err := fs.ReadFile(assets, "assets/index.html")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", ContentSecurityPolicy)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	})
}

// Files serves the page's script and style sheet under /ui/, with ContentSecurityPolicy.
func Files() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/ui/", http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // no listing of the folder
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Security-Policy", ContentSecurityPolicy)
		files.ServeHTTP(w, r)
	})
}
