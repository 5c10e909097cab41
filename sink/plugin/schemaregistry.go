package plugin

import "time"

// SchemaRegistry says how to reach the Schema Registry that the avro, protobuf and
// json_schema formats of the built-in plugins decode with (docs/formats.md). A pipeline has
// at most one, in Config.SchemaRegistry; plugins with equal settings share one client
// and one schema cache.
type SchemaRegistry struct {
	// URL is the registry's Confluent-compatible API, such as http://127.0.0.1:8081 or, for
	// Apicurio Registry, http://host:8080/apis/ccompat/v7. Required.
	URL string
	// Username and Password, when Username is set, are sent with HTTP basic auth.
	Username, Password string
	// BearerToken, when set, is sent as "Authorization: Bearer <token>". It excludes
	// Username.
	BearerToken string
	// TLS applies to https URLs.
	TLS SchemaRegistryTLS
	// Timeout bounds each request, connecting included; 0 means 10s.
	Timeout time.Duration
}

// SchemaRegistryTLS holds the TLS settings of an https registry URL.
type SchemaRegistryTLS struct {
	// CAFile is a PEM file of the certificate authorities to trust instead of the system's.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for mutual TLS.
	CertFile, KeyFile string
	// InsecureSkipVerify turns off the verification of the registry's certificate; for
	// tests only.
	InsecureSkipVerify bool
}
