package charttest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// secretsPrefix is where ci/secrets-values.yaml mounts its Secrets; validateConfigs puts test
// files there instead.
const secretsPrefix = "/run/secrets/eosink/"

// eosinkBin returns the eosink binary named by EOSINK. Its absence is a failure, not a skip.
func eosinkBin(t *testing.T) string {
	t.Helper()
	e := os.Getenv("EOSINK")
	if e == "" {
		t.Fatal("EOSINK is not set: run `make helm-test`, which builds bin/eosink from this checkout and sets it")
	}
	if _, err := exec.LookPath(e); err != nil {
		t.Fatalf("EOSINK=%s: %v", e, err)
	}
	return e
}

// validateConfigs loads every pipeline.yaml the chart rendered with `eosink run -validate`,
// as the pods would: POD_NAME and the variables the ci/ value sets name are set, and the
// secrets' mount paths point at test files (a certificate and key, passwords).
func validateConfigs(t *testing.T, objs []Object) error {
	t.Helper()
	bin := eosinkBin(t)
	secrets := secretFiles(t)
	var errs []error
	for _, o := range objs {
		cm, ok := o.Obj.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		text, ok := cm.Data["pipeline.yaml"]
		if !ok {
			continue
		}
		f := filepath.Join(t.TempDir(), "pipeline.yaml")
		if err := os.WriteFile(f, []byte(strings.ReplaceAll(text, secretsPrefix, secrets+"/")), 0o600); err != nil {
			return err
		}
		cmd := exec.Command(bin, "run", "-config", f, "-validate")
		cmd.Env = append(os.Environ(), "POD_NAME=sink-eosink-0", "KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092",
			"DATABASE_URL=postgres://eosink_run@127.0.0.1:5432/app")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err == nil && stderr.Len() > 0 { // a warning: an unset variable left a field unchecked
			err = errors.New("warnings")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: eosink run -validate: %v\n%s%s", o.ID(), err, stderr.String(), stdout.String()))
		}
	}
	return errors.Join(errs...)
}

var (
	secretsOnce sync.Once
	secretsDir  string
	secretsErr  error
)

// secretFiles writes, once per test binary, the files ci/secrets-values.yaml mounts: a
// self-signed certificate as CA and server certificate, its key, a user and passwords.
func secretFiles(t *testing.T) string {
	t.Helper()
	secretsOnce.Do(func() {
		secretsDir, secretsErr = os.MkdirTemp("", "eosink-chart-secrets-")
		if secretsErr != nil {
			return
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			secretsErr = err
			return
		}
		tpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "eosink chart test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, DNSNames: []string{"localhost"},
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
		if err != nil {
			secretsErr = err
			return
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			secretsErr = err
			return
		}
		cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		files := map[string][]byte{
			"tls/ca.pem": cert, "tls/tls.crt": cert,
			"tls/tls.key":       pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
			"database/user":     []byte("eosink_run\n"),
			"database/password": []byte("not-a-secret\n"),
			"kafka/password":    []byte("not-a-secret\n"),
		}
		for name, b := range files {
			p := filepath.Join(secretsDir, name)
			if secretsErr = os.MkdirAll(filepath.Dir(p), 0o700); secretsErr != nil {
				return
			}
			if secretsErr = os.WriteFile(p, b, 0o600); secretsErr != nil {
				return
			}
		}
	})
	if secretsErr != nil {
		t.Fatal(secretsErr)
	}
	return secretsDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if secretsDir != "" {
		_ = os.RemoveAll(secretsDir)
	}
	os.Exit(code)
}
