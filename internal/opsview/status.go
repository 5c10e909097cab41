package opsview

import (
	"slices"
	"time"

	"github.com/eosink/eosink/admin"
)

// Stopped is a stopped partition in a Summary: where, why, since when, by whom, the remedy.
type Stopped struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	admin.Stop
	OwnerAlive bool `json:"owner_alive"`
}

// Unowned is a partition no running instance holds, in a Summary, with why.
type Unowned struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	admin.Unowned
}

// Summary is one pipeline's line of `eosink status`.
type Summary struct {
	Pipeline   string        `json:"pipeline"`
	Partitions int           `json:"partitions"`
	Owners     []string      `json:"owners"`
	MaxEpoch   int64         `json:"max_epoch"`
	LastCommit time.Time     `json:"last_commit"`
	Lag        int64         `json:"lag"`
	LagSeconds float64       `json:"lag_seconds"` // the largest of its partitions' known ones
	Lagging    int           `json:"partitions_lagging"`
	Unowned    int           `json:"partitions_unowned"`
	Errors     int           `json:"partitions_in_error"`
	Dead       int64         `json:"dead_letters"`
	Alive      []string      `json:"owners_alive"`
	Stopped    []Stopped     `json:"stopped"`
	UnownedBy  []Unowned     `json:"unowned"` // each partition no running instance holds, with why
	Leases     []admin.Lease `json:"leases,omitempty"`
}

// Summaries sums up ps (admin.Client.List's positions, in pipeline order) per pipeline, with
// dead, the dead letters per pipeline (admin.Client.CountDeadLetters), and the pipelines'
// leases. The slice fields are nil when empty, as `eosink status -json` has always written
// them (null).
func Summaries(ps []admin.Position, dead map[string]int64, leases []admin.Lease) []*Summary {
	var out []*Summary
	by := map[string]*Summary{}
	for _, p := range ps {
		s := by[p.Pipeline]
		if s == nil {
			s = &Summary{Pipeline: p.Pipeline}
			by[p.Pipeline] = s
			out = append(out, s)
		}
		s.Partitions++
		if !slices.Contains(s.Owners, p.Owner) {
			s.Owners = append(s.Owners, p.Owner)
		}
		if p.OwnerAlive && !slices.Contains(s.Alive, p.Owner) {
			s.Alive = append(s.Alive, p.Owner)
		}
		if p.Stopped != nil {
			s.Stopped = append(s.Stopped, Stopped{Topic: p.Topic, Partition: p.Partition, Stop: *p.Stopped, OwnerAlive: p.OwnerAlive})
		}
		s.MaxEpoch = max(s.MaxEpoch, p.Epoch)
		if p.UpdatedAt.After(s.LastCommit) {
			s.LastCommit = p.UpdatedAt
		}
		s.Lag += p.Lag
		s.LagSeconds = max(s.LagSeconds, p.LagSeconds) // an unknown one (-1) counts as none
		if p.Unowned != nil {
			s.Unowned++
			s.UnownedBy = append(s.UnownedBy, Unowned{Topic: p.Topic, Partition: p.Partition, Unowned: *p.Unowned})
		}
		if p.Lag > 0 {
			s.Lagging++
		}
		if p.Error != "" {
			s.Errors++
		}
	}
	for _, s := range out {
		s.Dead = dead[s.Pipeline]
		for _, l := range leases {
			if l.Pipeline == s.Pipeline {
				s.Leases = append(s.Leases, l)
			}
		}
	}
	return out
}
