// Command eosink-ledger is eosink with the ledger plugin compiled in: every eosink command,
// and `eosink-ledger run -config pipeline.yaml` can use `sink: {type: ledger}`.
//
//	go build -o bin/eosink-ledger ./examples/custom-sink/eosink-ledger
package main

import (
	"os"

	"github.com/eosink/eosink/cli"
	_ "github.com/eosink/eosink/examples/custom-sink/ledger" // registers "ledger"
)

func main() { os.Exit(cli.Main()) }
