package cli

// The built-in plugins register themselves with sink/plugin.Register when imported. They are
// imported here, not in cmd/eosink, so that a custom binary built on cli.Main has them too.
// A new built-in plugin package is added to this list.
import (
	_ "github.com/eosink/eosink/sink/cdc"        // cdc
	_ "github.com/eosink/eosink/sink/inbox"      // inbox
	_ "github.com/eosink/eosink/sink/multi"      // multi
	_ "github.com/eosink/eosink/sink/outboxsink" // outbox
	_ "github.com/eosink/eosink/sink/sqlsink"    // sql
	_ "github.com/eosink/eosink/sink/table"      // table, upsert
)
