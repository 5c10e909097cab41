// Command modproxy serves a Go module cache's download directory as a GOPROXY on loopback,
// so that `docker build --network host` fetches eosink's modules from this machine's cache
// (filled by `go mod download`) instead of the internet: faster, and it works where the
// build container cannot reach or trust the public proxy. test/docker/build-image.sh runs it.
//
//	modproxy -dir "$(go env GOMODCACHE)/cache/download" -addr 127.0.0.1:39480 -addr-file FILE
//
// It listens on -addr (a fixed port, so that the build's GOPROXY argument, and with it
// Docker's layer cache, stays the same from one build to the next; port 0 takes a free one),
// writes the address to -addr-file, and serves until it is killed.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
)

func main() {
	dir := flag.String("dir", "", "module cache download directory ($GOMODCACHE/cache/download)")
	addr := flag.String("addr", "127.0.0.1:0", "loopback address to listen on")
	addrFile := flag.String("addr-file", "", "file to write the listening address to")
	flag.Parse()
	if *dir == "" || *addrFile == "" {
		fmt.Fprintln(os.Stderr, "usage: modproxy -dir DIR -addr-file FILE")
		os.Exit(2)
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	tmp := *addrFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(l.Addr().String()), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(tmp, *addrFile); err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(l, http.FileServer(http.Dir(*dir))))
}
