package pipeline

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// logSection reads log.format (text or json, default text) and log.level (debug, info,
// warn or error, in any case; default info) and returns a logger writing to out in them.
func (l *loader) logSection(format, level *yaml.Node, out io.Writer) *slog.Logger {
	json, lv := false, slog.LevelInfo
	if s, ok := l.value("log.format", format); ok {
		if s.val != "text" && s.val != "json" {
			l.fail("log.format", s.line, "%s is not text or json", describe(s))
		}
		json = s.val == "json"
	}
	if s, ok := l.value("log.level", level); ok {
		levels := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
		known := false
		if lv, known = levels[strings.ToLower(s.val)]; !known {
			l.fail("log.level", s.line, "%s is not debug, info, warn or error", describe(s))
		}
	}
	ho := &slog.HandlerOptions{Level: lv}
	if json {
		return slog.New(slog.NewJSONHandler(out, ho))
	}
	return slog.New(slog.NewTextHandler(out, ho))
}

// LogSection reads n, the log section of another config file of the eosink command (the
// relay's), as a pipeline file's log section is read: format (text or json) and level
// (debug, info, warn, error), their ${...} references expanded. n is the section as
// written, before ExpandNode; nil or null takes the defaults (text, info). It returns a
// logger writing to out, and the values read from files, to redact from messages; errors
// name the file, the key and the line, never a value.
func LogSection(file string, n *yaml.Node, out io.Writer) (*slog.Logger, []string, error) {
	l := newLoader(file, &expander{lookupEnv: os.LookupEnv, readFile: os.ReadFile, dir: filepath.Dir(file)})
	keys := l.keys("log", n)
	logger := l.logSection(keys["format"], keys["level"], out)
	if len(l.errs) > 0 {
		return nil, l.x.fromFiles, l.errs.sorted()
	}
	return logger, l.x.fromFiles, nil
}
