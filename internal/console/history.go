package console

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/eosink/eosink/admin"
)

// Defaults of History.
const (
	DefaultHistoryInterval = 10 * time.Second
	DefaultHistoryKeep     = 24 * time.Hour
)

// History keeps, per pipeline, samples of its lag, its applied position and its open dead
// letters, read every interval and kept for a day: the page's lag and throughput chart and the
// overview's rates. The console process keeps them in memory; a restart starts afresh.
type History struct {
	admin          *admin.Client
	interval, keep time.Duration
	log            *slog.Logger

	mu     sync.Mutex
	by     map[string][]Sample
	recent map[string]int64 // dead letters whose last failure is within the last hour
}

// Sample is one reading of a pipeline.
type Sample struct {
	At          time.Time `json:"at"`
	Lag         int64     `json:"lag"`          // records not yet applied, summed over partitions
	Applied     int64     `json:"applied"`      // the partitions' next offsets, summed: its growth is the rate
	DeadLetters int64     `json:"dead_letters"` // open dead letters
}

// HistoryPage is GET /api/v1/pipelines/{pipeline}/history.
type HistoryPage struct {
	Pipeline        string   `json:"pipeline"`
	IntervalSeconds float64  `json:"interval_seconds"`
	Samples         []Sample `json:"samples"` // oldest first, the last day at most
	// RecordsPerSecond is the applied rate over the last two samples; null with fewer.
	RecordsPerSecond *float64 `json:"records_per_second"`
	// DeadLettersLastHour counts the pipeline's dead letters that failed in the last hour.
	DeadLettersLastHour int64 `json:"dead_letters_last_hour"`
}

// NewHistory returns a History reading through c every interval (DefaultHistoryInterval when
// 0) and keeping keep (DefaultHistoryKeep when 0). Run it with Run.
func NewHistory(c *admin.Client, interval, keep time.Duration, log *slog.Logger) *History {
	if interval <= 0 {
		interval = DefaultHistoryInterval
	}
	if keep <= 0 {
		keep = DefaultHistoryKeep
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &History{admin: c, interval: interval, keep: keep, log: log, by: map[string][]Sample{}, recent: map[string]int64{}}
}

// Run samples until ctx ends. A failed reading is logged and skipped.
func (h *History) Run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		if err := h.sample(ctx); err != nil && ctx.Err() == nil {
			h.log.Warn("console: history sample failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *History) sample(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.interval)
	defer cancel()
	ps, err := h.admin.List(ctx, "")
	if err != nil {
		return err
	}
	dead, err := h.admin.CountDeadLetters(ctx)
	if err != nil {
		return err
	}
	recent, err := h.admin.CountDeadLettersSince(ctx, time.Now().Add(-time.Hour))
	if err != nil {
		return err
	}
	now := time.Now()
	cur := map[string]*Sample{}
	for _, p := range ps {
		s := cur[p.Pipeline]
		if s == nil {
			s = &Sample{At: now, DeadLetters: dead[p.Pipeline]}
			cur[p.Pipeline] = s
		}
		s.Lag += p.Lag
		s.Applied += p.NextOffset
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recent = recent
	for name, s := range cur {
		list := append(h.by[name], *s)
		i := 0
		for i < len(list) && now.Sub(list[i].At) > h.keep {
			i++
		}
		h.by[name] = list[i:]
	}
	return nil
}

// Page returns pipeline's samples.
func (h *History) Page(pipeline string) HistoryPage {
	h.mu.Lock()
	defer h.mu.Unlock()
	page := HistoryPage{Pipeline: pipeline, IntervalSeconds: h.interval.Seconds(), Samples: append([]Sample{}, h.by[pipeline]...),
		DeadLettersLastHour: h.recent[pipeline]}
	if n := len(page.Samples); n >= 2 {
		a, b := page.Samples[n-2], page.Samples[n-1]
		if dt := b.At.Sub(a.At).Seconds(); dt > 0 {
			r := max(0, float64(b.Applied-a.Applied)/dt)
			page.RecordsPerSecond = &r
		}
	}
	return page
}

func (h *handler) history(w http.ResponseWriter, r *http.Request) error {
	if err := query(r.URL.Query()); err != nil {
		return err
	}
	name := r.PathValue("pipeline")
	page := HistoryPage{Pipeline: name, Samples: []Sample{}}
	if h.cfg.History != nil {
		page = h.cfg.History.Page(name)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
