package sink

import "context"

// The heartbeat runs on the stop ledger's persistence goroutine (stopLedger.run), after each
// write of pending stops: it writes this instance's row of the instances table, so that
// `eosink status` tells whether an owner is alive now, and looks for running partitions
// whose rows another claim took (poller.checkEpochs).

// beat writes the heartbeat and checks the running partitions' epochs; final marks the
// instance stopped and checks nothing.
func (s *Sink) beat(ctx context.Context, final bool) {
	s.heartbeat(ctx, final)
	if !final {
		s.poll.checkEpochs(ctx)
	}
}

// heartbeat writes this instance's row of the instances table (stopped at shutdown).
func (s *Sink) heartbeat(ctx context.Context, stopped bool) {
	ctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
	defer cancel()
	if err := s.store.Heartbeat(ctx, stopped); err != nil {
		s.log.Warn("heartbeat failed", "err", err)
	}
}
