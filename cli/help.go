package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// help is one command's -h: its synopsis, a one-line description, and the names of the
// flags it takes (nil: every flag of its flag set).
type help struct {
	usage string   // after "usage: ", for example "eosink offsets list [-pipeline P] [-json]"
	desc  string   // one line
	flags []string // flag names, in the flag set; nil for all
}

// print writes the help to w with the flags of fs that h names. Defaults are the flags'
// defaults, never values parsed so far (a -database-url before -h stays unprinted).
func (h help) print(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", h.usage, h.desc)
	own := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		if h.flags == nil || slices.Contains(h.flags, f.Name) {
			own.Var(f.Value, f.Name, f.Usage)
			own.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	n := 0
	own.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nflags:\n")
		own.SetOutput(w)
		own.PrintDefaults()
	}
}

// check refuses flags set on the command line that h does not list, such as -to with
// offsets list.
func (h help) check(fs *flag.FlagSet, name string) error {
	if h.flags == nil {
		return nil
	}
	var foreign []string
	fs.Visit(func(f *flag.Flag) {
		if !slices.Contains(h.flags, f.Name) {
			foreign = append(foreign, "-"+f.Name)
		}
	})
	if len(foreign) > 0 {
		return usageError{fmt.Errorf("%s does not take %s (see eosink %s -h)", name, strings.Join(foreign, ", "), strings.TrimPrefix(name, "eosink "))}
	}
	return nil
}

// wantsHelp reports whether args ask for help: -h, -help, --h or --help before any "--".
// Help goes to standard output and exits 0.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--h", "--help":
			return true
		}
	}
	return false
}

// isHelp reports whether err is a request for help, which is not an error.
func isHelp(err error) bool { return errors.Is(err, flag.ErrHelp) }
