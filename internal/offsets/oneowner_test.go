package offsets

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// This package is the one owner of the offsets, instances, offsets_audit and leases tables: no other
// non-test Go file of the module may hold a statement on them. The check reads every such
// file's string literals and the strings concatenated from them (go/parser), and fails on
//   - SQL naming one of the tables after FROM, JOIN, INTO, UPDATE, TABLE, ON (qualified or
//     not, quoted or not), or a schema-qualified name of one (`%s.offsets`);
//   - SQL that writes or reads the tables' own columns (next_offset, stopped_*,
//     heartbeat_at, `epoch = epoch`);
//   - a table name built as an identifier: pgx.Identifier{schema, "offsets"}, or a call of
//     a function named like table or identifier with the name as argument (c.table("offsets")).
// The migrations' trigger is the database's own writer and is SQL, not Go.

// tableName matches one of the tables, quoted or not.
const tableName = `"?(offsets|instances|offsets_audit|leases)"?\b`

var (
	sqlOnTable = regexp.MustCompile(`\b(FROM|JOIN|INTO|UPDATE|TABLE|ON|ONLY)\s+([\w"%]+\.)?` + tableName)
	qualified  = regexp.MustCompile(`[\w"%]\.` + tableName + `|\b(offsets|instances|offsets_audit|leases)"?\.\w`)
	sqlVerb    = regexp.MustCompile(`\b(SELECT|INSERT|UPDATE|DELETE|SET|WHERE|RETURNING)\b`)
	ownColumn  = regexp.MustCompile(`\b(next_offset|stopped_(reason|error|at|by)|heartbeat_at)\b|\bepoch\s*=\s*epoch\b`)
	namesTable = regexp.MustCompile(`^(offsets|instances|offsets_audit|leases)$`)
	tableFunc  = regexp.MustCompile(`(?i)(table|ident)`)
	writes     = regexp.MustCompile(`\b(INSERT|UPDATE|DELETE|TRUNCATE|MERGE|ALTER|DROP)\b|\bFOR\s+(NO\s+KEY\s+)?(UPDATE|SHARE)\b`)
)

// readOnly are the files allowed to read the tables, and only with a plain SELECT: the
// examples' verifiers, which check the stored position independently of the engine whose
// results they verify, as a user's own check would. A write there fails as anywhere else.
var readOnly = map[string]bool{
	"examples/orders/main.go":       true,
	"examples/points/app/verify.go": true,
}

// finding is a statement on the tables outside this package.
type finding struct {
	pos  token.Position
	text string
}

// statements returns the statements on the tables in one Go source file.
func statements(fset *token.FileSet, name string, src []byte) ([]finding, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []finding
	report := func(n ast.Node, text string) {
		out = append(out, finding{fset.Position(n.Pos()), text})
	}
	source := func(n ast.Node) string {
		return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
	}
	sql := func(n ast.Node, text string) {
		if sqlOnTable.MatchString(text) ||
			(sqlVerb.MatchString(text) && (qualified.MatchString(text) || ownColumn.MatchString(text))) {
			report(n, text)
		}
	}
	done := map[ast.Node]bool{} // literals already checked as part of a concatenation
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ImportSpec:
			return false
		case *ast.BinaryExpr:
			if n.Op != token.ADD || done[n] {
				return true
			}
			// The concatenated string, with " ? " for each operand that is not a literal (a
			// variable, c.table("offsets"), pgx.Identifier{...}.Sanitize(): the identifier
			// forms are found below).
			var b strings.Builder
			var lit bool
			var flat func(e ast.Expr)
			flat = func(e ast.Expr) {
				switch e := e.(type) {
				case *ast.BinaryExpr:
					if e.Op == token.ADD {
						done[e] = true
						flat(e.X)
						flat(e.Y)
						return
					}
				case *ast.ParenExpr:
					flat(e.X)
					return
				case *ast.BasicLit:
					if s, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING {
						done[e], lit = true, true
						b.WriteString(s)
						return
					}
				}
				b.WriteString(" ? ")
			}
			flat(n)
			if lit {
				sql(n, b.String())
			}
		case *ast.BasicLit:
			if n.Kind != token.STRING || done[n] {
				return true
			}
			if s, err := strconv.Unquote(n.Value); err == nil {
				sql(n, s)
			}
		case *ast.CompositeLit:
			if n.Type == nil || !strings.HasSuffix(source(n.Type), "Identifier") {
				return true
			}
			for _, e := range n.Elts {
				if namesTable.MatchString(unquote(e)) {
					report(n, source(n))
				}
			}
		case *ast.CallExpr:
			var fn string
			switch f := n.Fun.(type) {
			case *ast.Ident:
				fn = f.Name
			case *ast.SelectorExpr:
				fn = f.Sel.Name
			}
			if !tableFunc.MatchString(fn) {
				return true
			}
			for _, a := range n.Args {
				if namesTable.MatchString(unquote(a)) {
					report(n, source(n))
				}
			}
		}
		return true
	})
	return out, nil
}

// unquote returns the value of a string literal, or "" for any other expression.
func unquote(e ast.Expr) string {
	if l, ok := e.(*ast.BasicLit); ok && l.Kind == token.STRING {
		s, _ := strconv.Unquote(l.Value)
		return s
	}
	return ""
}

// moduleRoot is the directory of the module's go.mod, above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
}

func TestNoStatementOnTheTablesElsewhere(t *testing.T) {
	root := moduleRoot(t)
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			switch {
			case path == root:
				return nil
			case path == here, strings.HasPrefix(name, "."), strings.HasPrefix(name, "_"), name == "testdata", name == "vendor":
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found, err := statements(fset, rel, src)
		if err != nil {
			return err
		}
		files++
		for _, f := range found {
			if readOnly[rel] && !writes.MatchString(f.text) {
				continue
			}
			t.Errorf("%s: a statement on the offsets, instances, offsets_audit or leases table outside internal/offsets: %q", f.pos, f.text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("checked %d files under %s, want the whole module", files, root)
	}
}

// TestStatementsFindsEachForm: the check fails on each form a statement on the tables takes,
// and not on other uses of the words.
func TestStatementsFindsEachForm(t *testing.T) {
	found := map[string]string{
		"plain":          `q := "SELECT next_offset FROM eosink.offsets WHERE pipeline = $1"`,
		"concatenated":   "q := `UPDATE ` + table + ` SET stopped_reason = NULL WHERE pipeline = $1`",
		"identifier":     `t := pgx.Identifier{schema, "offsets"}.Sanitize()`,
		"table call":     "q := `SELECT topic FROM ` + c.table(\"offsets\")",
		"instances":      `q := "INSERT INTO " + t + " (pipeline) VALUES ($1) ON CONFLICT DO UPDATE SET stopped = instances.stopped"`,
		"audit":          `q := "SELECT count(*) FROM " + pgx.Identifier{s, "offsets_audit"}.Sanitize()`,
		"quoted":         `q := "DELETE FROM \"eosink\".\"offsets\""`,
		"sprintf":        `q := fmt.Sprintf("UPDATE %s.offsets SET epoch = epoch + 1", schema)`,
		"epoch bump":     "q := `UPDATE ` + t + ` SET epoch = epoch + 1 WHERE pipeline = $1`",
		"join":           "q := `SELECT 1 FROM pg_stat_activity a JOIN eosink.offsets o ON o.pipeline = $1`",
		"column only":    "q := `SELECT next_offset, epoch FROM ` + s.table",
		"identifier var": `var id = pgx.Identifier{"instances"}`,
	}
	clean := map[string]string{
		"log key":     `log.Info("settled", "next_offset", n)`,
		"prose":       `err := fmt.Errorf("read offsets: %w", err)`,
		"subcommand":  `switch cmd { case "offsets": }`,
		"other table": "q := `SELECT count(*) FROM ` + pgx.Identifier{schema, \"dead_letters\"}.Sanitize()",
		"import":      `import "github.com/eosink/eosink/internal/offsets"`,
		"topic":       `cfg := map[string]string{"offset.storage.topic": "connect.offsets"}`,
		"flag":        `fs.String("offsets-schema", "eosink", "the schema of eosink's offsets table")`,
	}
	for name, stmt := range found {
		got, err := statements(token.NewFileSet(), name, []byte("package p\nfunc f() {\n"+stmt+"\n}\n"))
		if strings.HasPrefix(stmt, "var ") {
			got, err = statements(token.NewFileSet(), name, []byte("package p\n"+stmt+"\n"))
		}
		if err != nil || len(got) == 0 {
			t.Errorf("%s: %s: not found (%v)", name, stmt, err)
		}
	}
	for name, stmt := range clean {
		src := "package p\nfunc f() {\n" + stmt + "\n}\n"
		if strings.HasPrefix(stmt, "import ") {
			src = "package p\n" + stmt + "\n"
		}
		got, err := statements(token.NewFileSet(), name, []byte(src))
		if err != nil || len(got) != 0 {
			t.Errorf("%s: %s: found %v (%v), want nothing", name, stmt, got, err)
		}
	}
	// The examples' verifiers may read, not write.
	for stmt, ok := range map[string]bool{
		"SELECT next_offset FROM  ?  WHERE pipeline = $1": false,
		`pgx.Identifier{s, "offsets"}`:                    false,
		"UPDATE x.offsets SET next_offset = 0":            true,
		"SELECT next_offset FROM x.offsets FOR UPDATE":    true,
	} {
		if writes.MatchString(stmt) != ok {
			t.Errorf("writes(%q) = %v, want %v", stmt, !ok, ok)
		}
	}
}
