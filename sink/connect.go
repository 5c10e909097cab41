package sink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/rebalance"
)

// metadata asks for the metadata of topic (or of all topics) for up to timeout, in short attempts, and between them
// reads the consumer's error events, so that a broker that refuses the credentials or the
// TLS handshake fails the start at once, with librdkafka's reason, instead of a timeout.
func (s *Sink) metadata(ctx context.Context, topic *string, all bool, timeout time.Duration) (*kafka.Metadata, error) {
	deadline := time.Now().Add(timeout)
	var last kafka.Error
	for {
		attempt := min(time.Until(deadline), time.Second)
		md, err := s.poll.consumer.GetMetadata(topic, all, int(max(attempt, 100*time.Millisecond).Milliseconds()))
		if err == nil {
			return md, nil
		}
		for {
			ev := s.poll.consumer.Poll(0)
			if ev == nil {
				break
			}
			if ke, ok := ev.(kafka.Error); ok {
				if ferr := s.connectFailure(ke); ferr != nil {
					return nil, ferr
				}
				last = ke
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if last.Code() != kafka.ErrNoError {
				return nil, fmt.Errorf("eosink: cannot reach Kafka at %s: %w (last error: %v)", s.brokers(), err, last)
			}
			return nil, fmt.Errorf("eosink: cannot reach Kafka at %s: %w", s.brokers(), err)
		}
	}
}

// connectFailure returns the start-up error for a librdkafka error event that retrying cannot
// cure: refused credentials (ErrKafkaAuthentication), a failed TLS handshake (ErrKafkaTLS:
// untrusted certificate, wrong host name, refused client certificate), or any fatal error.
// It returns nil for errors worth waiting out (a broker not up yet).
func (s *Sink) connectFailure(e kafka.Error) error {
	msg := e.Error()
	switch {
	case isAuthError(e):
		return fmt.Errorf("%w at %s (check sasl.mechanism, sasl.username and sasl.password): %v", ErrKafkaAuthentication, s.brokers(), e)
	case isTLSError(e):
		return fmt.Errorf("%w at %s (%s): %v", ErrKafkaTLS, s.brokers(), s.tlsCause(msg), e)
	case e.IsFatal():
		return fmt.Errorf("eosink: kafka fatal error at %s: %w", s.brokers(), e)
	}
	return nil
}

// isAuthError reports whether librdkafka's error event is a refused SASL authentication.
func isAuthError(e kafka.Error) bool {
	return e.Code() == kafka.ErrAuthentication || strings.Contains(e.Error(), "SASL authentication error")
}

// isTLSError reports whether librdkafka's error event is a failed TLS handshake or a TLS
// alert from the broker (a refused client certificate shows as one).
func isTLSError(e kafka.Error) bool {
	msg := e.Error()
	return e.Code() == kafka.ErrSsl || strings.Contains(msg, "SSL handshake failed") || strings.Contains(msg, "certificate verify failed") ||
		(strings.Contains(msg, "SSL routines") && strings.Contains(msg, "alert"))
}

// tlsCause names the cause of a failed TLS handshake. librdkafka reports an untrusted
// certificate and one for another host name alike ("certificate verify failed"), so for
// those the broker's certificate is checked again here, the way librdkafka checks it.
func (s *Sink) tlsCause(msg string) string {
	switch {
	case strings.Contains(msg, "certificate verify failed"):
		if cause := diagnoseTLS(s.cfg.kafkaConfig()); cause != "" {
			return cause
		}
		return "the broker's certificate could not be verified: check ssl.ca.location, and that the certificate names the broker's host"
	case strings.Contains(msg, "alert") && strings.Contains(msg, "certificate"):
		return "the broker refused the client certificate: check ssl.certificate.location and ssl.key.location"
	}
	return "check the ssl.* settings"
}

// diagnoseTLS connects to the first bootstrap server and verifies its certificate against
// ssl.ca.location (a PEM file) or ssl.ca.pem, and its host name unless
// ssl.endpoint.identification.algorithm is none. It returns what is wrong, or "" when it
// cannot tell (another CA source, the broker unreachable, or nothing wrong).
func diagnoseTLS(m kafka.ConfigMap) string {
	pool := x509.NewCertPool()
	switch {
	case m["ssl.ca.pem"] != nil:
		if !pool.AppendCertsFromPEM([]byte(fmt.Sprint(m["ssl.ca.pem"]))) {
			return ""
		}
	case m["ssl.ca.location"] != nil:
		b, err := os.ReadFile(fmt.Sprint(m["ssl.ca.location"]))
		if err != nil || !pool.AppendCertsFromPEM(b) {
			return ""
		}
	default:
		return "" // the system's CAs (or a certificate store): librdkafka's view may differ from Go's
	}
	addr := strings.TrimSpace(strings.Split(fmt.Sprint(m["bootstrap.servers"]), ",")[0])
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:]
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) // verified below
	if err != nil {
		return ""
	}
	certs := conn.ConnectionState().PeerCertificates
	_ = conn.Close()
	if len(certs) == 0 {
		return ""
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter}); err != nil {
		return "the broker's certificate is not trusted: " + err.Error() + ": check ssl.ca.location"
	}
	if fmt.Sprint(m["ssl.endpoint.identification.algorithm"]) != "none" {
		if err := certs[0].VerifyHostname(host); err != nil {
			return "the broker's certificate is for another host name: " + err.Error()
		}
	}
	return ""
}

// openDatabase creates the pool (unless the caller gave one), checks the connection,
// migrates when asked, checks the schema versions and lets the plugin check the database.
func (s *Sink) openDatabase(ctx context.Context) error {
	s.pool = s.cfg.Pool
	if s.pool == nil {
		pc, err := pgxpool.ParseConfig(s.cfg.DatabaseURL)
		if err != nil {
			return &ConfigError{Field: "DatabaseURL", Reason: err.Error()}
		}
		rp := pc.ConnConfig.RuntimeParams
		if _, ok := rp["application_name"]; !ok {
			rp["application_name"] = rebalance.SessionName(s.cfg.Pipeline) // ASCII, fits 63 bytes
		}
		if _, ok := rp["idle_in_transaction_session_timeout"]; !ok {
			rp["idle_in_transaction_session_timeout"] = strconv.FormatInt(s.cfg.IdleInTransactionTimeout.Milliseconds(), 10)
		}
		if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return fmt.Errorf("eosink: database pool: %w", err)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := s.pool.Ping(pctx); err != nil {
		if s.cfg.Pool == nil {
			s.pool.Close()
		}
		return fmt.Errorf("eosink: cannot connect to PostgreSQL at %s: %w", safeDatabaseAddr(s.pool), err)
	}
	url := s.cfg.DatabaseURL
	if url == "" {
		url = s.cfg.Pool.Config().ConnString()
	}
	if err := s.prepareDatabase(ctx, url); err != nil {
		if s.cfg.Pool == nil {
			s.pool.Close()
		}
		return err
	}
	return nil
}

// sessionName returns this sink's application_name as the server shows it in
// pg_stat_activity (truncated to 63 bytes, non-ASCII rewritten), which is what a claim
// matches to find a stalled session of the pipeline (offsets.Store.TerminateStalled).
func (s *Sink) sessionName(ctx context.Context) string {
	name := s.pool.Config().ConnConfig.RuntimeParams["application_name"]
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var shown string
	if err := s.pool.QueryRow(qctx, "SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&shown); err != nil {
		s.log.Warn("could not read this session's application_name; matching stalled sessions by the configured one", "err", err)
		return name
	}
	return shown
}

// terminateFailed logs why a stalled session of the pipeline could not be ended, with the
// remedy when a privilege is missing.
func (s *Sink) terminateFailed(topic string, partition int32, err error) {
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42501" {
		role := s.pool.Config().ConnConfig.User
		s.log.Error("cannot end a stalled session holding the offset row: permission denied; claims wait for the server's timeouts. "+
			"Run every sink of the pipeline as the same role, or GRANT pg_signal_backend TO "+role,
			"topic", topic, "partition", partition, "role", role, "err", err)
		return
	}
	s.log.Warn("looking for a stalled session holding the offset row failed", "topic", topic, "partition", partition, "err", err)
}

// checkSignalPrivilege warns at start when this role cannot end another role's stalled
// session of the pipeline (pg_terminate_backend needs the same role, pg_signal_backend, or a
// superuser): then every sink of the pipeline must run as this role, or a claim waits for
// the server's timeouts when a stalled session holds the offset row.
func (s *Sink) checkSignalPrivilege(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var role string
	var can bool
	err := s.pool.QueryRow(qctx, `SELECT current_user::text, rolsuper OR pg_has_role(current_user, 'pg_signal_backend', 'USAGE')
		FROM pg_roles WHERE rolname = current_user`).Scan(&role, &can)
	switch {
	case err != nil:
		s.log.Warn("could not check whether this role may end stalled sessions", "err", err)
	case !can:
		s.log.Warn("this role can end a stalled session of the pipeline only if that session runs as the same role: "+
			"run every sink of the pipeline as "+role+", or GRANT pg_signal_backend TO "+role, "role", role)
	}
}

// safeDatabaseAddr names the server without user or password.
func safeDatabaseAddr(p *pgxpool.Pool) string {
	cc := p.Config().ConnConfig
	return fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, cc.Database)
}

func ptr[T any](v T) *T { return &v }
