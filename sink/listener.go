package sink

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eosink/eosink/internal/offsets"
)

// listen waits for notifications of operator resets on a dedicated connection and asks the
// poll goroutine to look at every partition. It reconnects after errors until ctx ends.
func (s *Sink) listen(ctx context.Context) {
	backoff := s.cfg.RetryBackoff
	for ctx.Err() == nil {
		// A connection from the pool (its BeforeConnect hooks apply), taken out of it.
		var conn *pgx.Conn
		pc, err := s.pool.Acquire(ctx)
		if err == nil {
			conn = pc.Hijack()
		}
		if err == nil {
			err = offsets.Listen(ctx, conn)
		}
		if err == nil {
			backoff = s.cfg.RetryBackoff
			s.poll.rechecks.requestAll() // anything missed while not listening
			for {
				var n *pgconn.Notification
				n, err = conn.WaitForNotification(ctx)
				if err != nil {
					break
				}
				if n.Payload == s.cfg.Pipeline {
					s.poll.rechecks.requestAll()
				}
			}
		}
		if conn != nil {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(cctx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("listening for operator resets failed; retrying", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.cfg.MaxRetryBackoff)
	}
}
