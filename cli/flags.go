package cli

import (
	"flag"
	"fmt"
	"strconv"
)

// intFlag is an integer flag with a range: a value outside it, or one that is not a number,
// is refused while parsing, with a message naming the flag (the flag package adds "invalid
// value ... for flag -NAME"). It never wraps: -partition 4294967296 is an error, not 0.
type intFlag struct {
	p        *int
	min, max int64
	what     string // "a partition number (0 to 2147483647; -1: every partition)"
}

// intVar defines an int flag of fs whose values must lie in [lo, hi].
func intVar(fs *flag.FlagSet, p *int, name string, def int, lo, hi int64, what, usage string) {
	*p = def
	fs.Var(&intFlag{p: p, min: lo, max: hi, what: what}, name, usage)
}

func (f *intFlag) String() string {
	if f == nil || f.p == nil {
		return "0"
	}
	return strconv.Itoa(*f.p)
}

func (f *intFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < f.min || n > f.max {
		return fmt.Errorf("not %s", f.what)
	}
	*f.p = int(n)
	return nil
}

// parseInterleaved parses flags that may stand before and after positional arguments.
// onFirst, when not nil, is called with the first positional argument as soon as it is read
// (a subcommand: its -h is then its own).
func parseInterleaved(fs *flag.FlagSet, args []string, onFirst func(string)) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, parseError(err)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		if len(pos) == 0 && onFirst != nil {
			onFirst(fs.Arg(0))
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
