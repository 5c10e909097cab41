package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/rebalance"
)

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
// matches to find a stalled session of the pipeline (rebalance.Store.TerminateStalled).
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

// safeDatabaseAddr names the server without user or password.
func safeDatabaseAddr(p *pgxpool.Pool) string {
	cc := p.Config().ConnConfig
	return fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, cc.Database)
}

func ptr[T any](v T) *T { return &v }
