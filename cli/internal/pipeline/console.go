package pipeline

import (
	"go.yaml.in/yaml/v3"
)

// DefaultConsoleListen is where `eosink console` serves when the console section names no
// listen address: the loopback interface only.
const DefaultConsoleListen = "127.0.0.1:9470"

// ConsoleOptions are the console section's settings, for `eosink console` (docs/console.md).
type ConsoleOptions struct {
	// Listen (console.listen) is the address of the management API. Defaults to
	// DefaultConsoleListen.
	Listen string
	// TLSCertFile and TLSKeyFile (console.tls.cert_file, console.tls.key_file) serve HTTPS
	// with this PEM certificate (chain) and key, as the http section's tls does. Both or
	// neither. Defaults to plain HTTP.
	TLSCertFile, TLSKeyFile string
	// Mutations (console.mutations) allows the requests that change something: replaying
	// and discarding dead letters, moving positions. They then need a token of TokensFile.
	// Defaults to false: the API is read-only.
	Mutations bool
	// TokensFile (console.tokens_file) holds the API's bearer tokens, one "TOKEN NAME" per
	// line, NAME being the operator the audit records for the token's requests. Required
	// with Mutations; when set, every request needs one of its tokens. Defaults to none.
	TokensFile string
}

// console reads the console section (a mapping with listen, tls, mutations, tokens_file).
func (l *loader) console(n *yaml.Node) ConsoleOptions {
	o := ConsoleOptions{Listen: DefaultConsoleListen}
	keys := l.keys("console", n)
	if s := l.listen("console.listen", keys["listen"]); s != "" {
		o.Listen = s
	}
	o.TLSCertFile, o.TLSKeyFile = l.tls("console.tls", keys["tls"])
	o.Mutations = l.boolean("console.mutations", keys["mutations"])
	o.TokensFile = l.str("console.tokens_file", keys["tokens_file"])
	l.readable("console.tokens_file", o.TokensFile)
	if o.Mutations && o.TokensFile == "" && !l.unknown("console.tokens_file") {
		l.fail("console.tokens_file", l.lines["console.mutations"], "required with mutations: true (each mutation names its operator by the token it comes with)")
	}
	return o
}
