package mapping

// SplitTableTemplate splits a table name template ("replica.${source.table}") at the dots
// outside ${...}: the parts are schema and table. The table and cdc plugins' templates share it.
func SplitTableTemplate(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '{':
			depth++
			i++
		case s[i] == '}' && depth > 0:
			depth--
		case s[i] == '.' && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}
