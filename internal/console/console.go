package console

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/console/ui"
	"github.com/eosink/eosink/sink"
)

// Config is what New serves.
type Config struct {
	// Admin reads and changes the eosink tables of one schema, and reads the brokers for
	// lag and for moves. Required.
	Admin *admin.Client
	// Pipeline is the console's config file's pipeline: the one whose dead letters Plugin
	// replays. Defaults to none (replay refused).
	Pipeline string
	// Plugin is that pipeline's sink plugin, through which replays go, as `eosink dlq replay
	// -config` does. Defaults to nil: replay is refused with 409.
	Plugin sink.Plugin
	// Mutations allows replay, discard and moving positions. It needs Tokens. Defaults to
	// false: read-only.
	Mutations bool
	// Tokens, when set, are required on every request; each names the operator that a
	// mutation is audited with. Defaults to nil: reads need no token, and mutations cannot
	// be enabled.
	Tokens *Tokens
	// Logger receives a line per mutation (operator, what, result) and the detail of
	// internal errors. Defaults to a logger that discards.
	Logger *slog.Logger
	// History, when set, serves each pipeline's samples of lag, position and dead letters
	// (GET /api/v1/pipelines/{pipeline}/history; the page's chart); the caller runs it.
	// Defaults to nil: the endpoint answers with no samples.
	History *History
	// NoUI leaves the web page out: only /api/v1 is served. Defaults to false: the page is
	// served at / and its files under /ui/.
	NoUI bool
}

// ErrMutationsNeedTokens is New's error for Config.Mutations without Config.Tokens.
var ErrMutationsNeedTokens = errors.New("console: mutations need a tokens file (console.tokens_file): each mutation is audited with its token's operator")

// handler serves the API.
type handler struct {
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	replayMu sync.Mutex // one replay at a time: they share the plugin
	cop      *http.CrossOriginProtection
}

// route is one of the API's endpoints. mutates marks those that change something.
type route struct {
	method, path string
	mutates      bool
	serve        func(h *handler, w http.ResponseWriter, r *http.Request) error
}

// routes are the API's endpoints; docs/openapi.yaml documents each.
var routes = []route{
	{"GET", "/api/v1/pipelines", false, (*handler).pipelines},
	{"GET", "/api/v1/pipelines/{pipeline}", false, (*handler).pipeline},
	{"GET", "/api/v1/pipelines/{pipeline}/dead-letters", false, (*handler).deadLetters},
	{"POST", "/api/v1/pipelines/{pipeline}/offsets", true, (*handler).moveOffsets},
	{"GET", "/api/v1/dead-letters/{id}", false, (*handler).deadLetter},
	{"POST", "/api/v1/dead-letters/{id}/replay", true, (*handler).replay},
	{"POST", "/api/v1/dead-letters/{id}/discard", true, (*handler).discard},
	{"GET", "/api/v1/pipelines/{pipeline}/history", false, (*handler).history},
	{"GET", "/api/v1/audit", false, (*handler).audit},
}

// Routes returns the API's endpoints as "METHOD PATH" (PATH with {parameters}).
func Routes() []string {
	out := make([]string, len(routes))
	for i, rt := range routes {
		out[i] = rt.method + " " + rt.path
	}
	return out
}

// New returns the API's handler for cfg.
func New(cfg Config) (http.Handler, error) {
	if cfg.Admin == nil {
		return nil, errors.New("console: Config.Admin is required")
	}
	if cfg.Mutations && cfg.Tokens == nil {
		return nil, ErrMutationsNeedTokens
	}
	h := &handler{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), cop: http.NewCrossOriginProtection()}
	if h.log == nil {
		h.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	allowed := map[string][]string{}
	for _, rt := range routes {
		h.mux.Handle(rt.method+" "+rt.path, h.guard(rt))
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	for path, methods := range allowed {
		h.mux.Handle(path, methodNotAllowed(methods))
	}
	if !cfg.NoUI {
		h.mux.Handle("GET /{$}", ui.Page())
		h.mux.Handle("GET /ui/", ui.Files())
	}
	h.mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, ErrorBody{Error: "no such path: see docs/openapi.yaml", Field: "path"})
	}))
	return securityHeaders(h.mux), nil
}
