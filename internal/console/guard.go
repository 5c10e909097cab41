package console

import (
	"context"
	"net/http"
	"strings"
)

// CSRFHeader is the header every mutating request must carry, with the value "1". A page of
// another origin cannot add it without a CORS preflight, which the console never grants.
const CSRFHeader = "X-Eosink-CSRF"

// securityHeaders sets, on every response, a Content-Security-Policy that allows nothing
// (the API serves no page), nosniff, no framing, no referrer, no caching, and HSTS over TLS.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		if r.TLS != nil {
			hd.Set("Strict-Transport-Security", "max-age=31536000")
		}
		next.ServeHTTP(w, r)
	})
}

// methodNotAllowed answers 405 with the methods a path takes.
func methodNotAllowed(methods []string) http.Handler {
	allow := strings.Join(methods, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeJSON(w, http.StatusMethodNotAllowed, ErrorBody{Error: r.Method + " is not allowed here (" + allow + ")", Field: "method"})
	})
}

type operatorKey struct{}

// operatorOf is the operator the request's token names ("" without tokens).
func operatorOf(ctx context.Context) string {
	s, _ := ctx.Value(operatorKey{}).(string)
	return s
}

// guard checks, before rt serves: for a mutation, that mutations are on (else 403); with
// tokens, a valid bearer token (else 401); for a mutation, the CSRF header and that the
// browser, if any, sends it from the same origin (else 403).
func (h *handler) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.mutates && !h.cfg.Mutations {
			writeJSON(w, http.StatusForbidden, ErrorBody{Error: "mutations are disabled: set console.mutations: true (with console.tokens_file) to allow them"})
			return
		}
		if h.cfg.Tokens != nil {
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			op, err := h.cfg.Tokens.operator(strings.TrimSpace(token))
			if !ok || err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="eosink console"`)
				writeJSON(w, http.StatusUnauthorized, ErrorBody{Error: "a valid bearer token is required (Authorization: Bearer TOKEN, from console.tokens_file)", Field: "Authorization"})
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), operatorKey{}, op))
		}
		if rt.mutates {
			if r.Header.Get(CSRFHeader) != "1" {
				writeJSON(w, http.StatusForbidden, ErrorBody{Error: "a mutation needs the header " + CSRFHeader + ": 1", Field: CSRFHeader})
				return
			}
			if err := h.cop.Check(r); err != nil {
				writeJSON(w, http.StatusForbidden, ErrorBody{Error: "cross-origin request refused: " + err.Error(), Field: "Origin"})
				return
			}
		}
		if err := rt.serve(h, w, r); err != nil {
			h.fail(w, r, err)
		}
	})
}
