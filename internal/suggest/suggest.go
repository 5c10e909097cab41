// Package suggest words the errors of configuration keys that are not known: what the
// section takes and, for a typo, the key meant ("did you mean group?"). The pipeline config
// file's loader and the sink plugins' sections use it, so that every unknown key reads alike.
package suggest

import "strings"

// UnknownKey is the reason for key, which the section where (a path such as "kafka", or
// "the top level") does not take: "unknown key (kafka has brokers, group, ...); did you mean
// group?", or "(kafka has none)". The suggestion is there only when key looks like a typo of a known key (Closest).
// The error's field is where's path with key.
func UnknownKey(where, key string, known []string) string {
	list := strings.Join(known, ", ")
	if len(known) == 0 {
		list = "none"
	}
	msg := "unknown key (" + where + " has " + list + ")"
	if s := Closest(key, known); s != "" {
		msg += "; did you mean " + s + "?"
	}
	return msg
}

// Closest returns the known key nearest to key when it looks like a typo of it (an edit
// distance under 3, ignoring case), "" otherwise.
func Closest(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
