// Command eosink runs pipelines from config files and operates eosink's database-owned
// offsets. It is package github.com/eosink/eosink/cli with the built-in plugins; see that
// package for the commands, and for building an eosink binary with plugins of your own.
package main

import (
	"os"

	"github.com/eosink/eosink/cli"
)

func main() { os.Exit(cli.Main()) }
