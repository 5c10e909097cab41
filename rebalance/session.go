package rebalance

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Sessions of a pipeline. Ending the stalled ones is the offsets store's (internal/offsets).
//
// A sink's database sessions carry an application_name that names the pipeline, so that a
// claim can tell a stalled session of the same pipeline (a zombie holding the offset row)
// from anyone else's. PostgreSQL keeps at most 63 bytes of that name (NAMEDATALEN-1) and
// rewrites non-ASCII characters, so the name is built to survive both: SessionName.

// sessionNameMax is the longest application_name PostgreSQL keeps in pg_stat_activity.
const sessionNameMax = 63

// SessionName returns the default application_name of a pipeline's sessions:
// "eosink:" + the first 8 hex digits of the SHA-256 of the pipeline + ":" + the pipeline
// with every byte outside printable ASCII replaced by '?', cut so that the whole fits in 63
// bytes. It is ASCII and short, so the server stores it unchanged; the hash keeps pipelines
// that differ only past the cut, or only in non-ASCII characters, apart.
func SessionName(pipeline string) string {
	sum := sha256.Sum256([]byte(pipeline))
	name := "eosink:" + hex.EncodeToString(sum[:4]) + ":"
	var b strings.Builder
	for i := 0; i < len(pipeline) && len(name)+b.Len() < sessionNameMax; i++ {
		if c := pipeline[i]; c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
		} else {
			b.WriteByte('?')
		}
	}
	return name + b.String()
}
