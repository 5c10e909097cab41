package pipeline

import (
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/sink/plugin"
)

// rawRegistry is the schema_registry section: how the plugins' avro, protobuf and
// json_schema formats reach the Schema Registry. It is handed to the plugin as
// plugin.Config.SchemaRegistry.
type rawRegistry struct {
	URL         yaml.Node      `yaml:"url"`
	Username    yaml.Node      `yaml:"username"`
	Password    yaml.Node      `yaml:"password"`
	BearerToken yaml.Node      `yaml:"bearer_token"`
	Timeout     yaml.Node      `yaml:"timeout"`
	TLS         rawRegistryTLS `yaml:"tls"`
}

type rawRegistryTLS struct {
	CAFile             yaml.Node `yaml:"ca_file"`
	CertFile           yaml.Node `yaml:"cert_file"`
	KeyFile            yaml.Node `yaml:"key_file"`
	InsecureSkipVerify yaml.Node `yaml:"insecure_skip_verify"`
}

// registry converts the schema_registry section; nil when the file has none. Passwords and
// tokens are secrets: they never appear in messages.
func (l *loader) registry(r *rawRegistry) *plugin.SchemaRegistry {
	const path = "schema_registry"
	if l.broken[path] {
		return nil
	}
	t := &r.TLS
	present := false
	for _, n := range []*yaml.Node{&r.URL, &r.Username, &r.Password, &r.BearerToken, &r.Timeout, &t.CAFile, &t.CertFile, &t.KeyFile, &t.InsecureSkipVerify} {
		present = present || !isNull(deref(n))
	}
	if !present {
		return nil
	}
	reg := &plugin.SchemaRegistry{}
	if s, ok := l.value(path+".password", &r.Password); ok {
		reg.Password = s.val
		l.secrets.Add(s.val)
	}
	if s, ok := l.value(path+".bearer_token", &r.BearerToken); ok {
		reg.BearerToken = s.val
		l.secrets.Add(s.val)
	}
	if s, ok := l.value(path+".url", &r.URL); ok {
		reg.URL = strings.TrimRight(s.val, "/")
		u, err := url.Parse(s.val)
		if u != nil && u.User != nil {
			if pw, set := u.User.Password(); set {
				l.secrets.Add(pw)
			}
		}
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			l.fail(path+".url", s.line, "not an http or https URL (for example http://127.0.0.1:8081, or Apicurio's http://host:8080/apis/ccompat/v7)")
		}
	} else {
		l.missing(path+".url", path, s, "required: the registry's Confluent-compatible API, for example http://127.0.0.1:8081 or ${SCHEMA_REGISTRY_URL}")
	}
	user, hasUser := l.value(path+".username", &r.Username)
	reg.Username = user.val
	switch {
	case hasUser && reg.BearerToken != "":
		l.fail(path+".bearer_token", l.lines[path+".bearer_token"], "set username and password (basic auth) or bearer_token, not both")
	case !hasUser && reg.Password != "":
		l.fail(path+".password", l.lines[path+".password"], "a password needs a username")
	}
	reg.Timeout = l.duration(path+".timeout", &r.Timeout)
	reg.TLS.CAFile = l.str(path+".tls.ca_file", &t.CAFile)
	reg.TLS.CertFile = l.str(path+".tls.cert_file", &t.CertFile)
	reg.TLS.KeyFile = l.str(path+".tls.key_file", &t.KeyFile)
	reg.TLS.InsecureSkipVerify = l.boolean(path+".tls.insecure_skip_verify", &t.InsecureSkipVerify)
	if (reg.TLS.CertFile == "") != (reg.TLS.KeyFile == "") {
		missing := "tls.key_file"
		if reg.TLS.CertFile == "" {
			missing = "tls.cert_file"
		}
		l.fail(path+"."+missing, l.lines[path+".tls"], "tls.cert_file and tls.key_file go together (a client certificate and its key)")
	}
	return reg
}
