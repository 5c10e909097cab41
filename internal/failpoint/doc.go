// Package failpoint lets tests make a sink process fail at a named point of the commit
// protocol: kill itself with SIGKILL, sleep, or exit. Failpoints are configured with the
// EOSINK_FAILPOINTS environment variable.
//
// # Only in test builds
//
// Failpoints exist only in builds with the failpoints build tag:
//
//	go build -tags failpoints ./cmd/eosink
//	go test -tags failpoints ./...
//
// The Makefile's test targets and internal/testbed (which builds the binaries the
// integration tests and the chaos suite run) pass it. Without the tag, which is how eosink
// ships, Eval is an empty function the compiler inlines away, Load refuses any failpoint,
// and the binary neither reads EOSINK_FAILPOINTS nor can kill itself. With the tag, Eval
// costs one atomic load when no failpoint is set.
//
// # Syntax
//
// EOSINK_FAILPOINTS is a comma-separated list of name=action, where action is one of
//
//	kill            SIGKILL this process
//	sleep(DUR)      sleep for a Go duration, for example sleep(30s)
//	exit(CODE)      exit with the code at once, without cleanup
//
// An action may be suffixed with @N to fire only on the Nth time the point is reached
// (1-based), for example after-commit=kill@3. Without @N it fires every time.
//
// Each time a failpoint fires it writes one line "failpoint fired: NAME ACTION" to stderr, so
// that a test can prove that the fault it meant to inject did happen.
package failpoint
