package mapping

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
)

// ExprCostLimit is the most an expression may cost in one evaluation, in CEL's cost units
// (about one per operation, and per few bytes of a string a function reads). An evaluation
// that would cost more stops with an error, so that no expression or record can hang a
// batch: a loop over a list of a million elements, or comprehensions nested to the power
// of the input, are refused at about this many steps.
const ExprCostLimit = 100_000

// ErrExpr is wrapped by the errors of an expression's evaluation: a missing key, a type
// that does not fit, the cost limit, a where or check that is not a bool. The record is
// poison.
var ErrExpr = errors.New("expression failed")

// ErrSkip is what Row and AppendCopy return for a record that the Mapping's Where filters
// out: the record is not written, and its offset is committed with the batch.
var ErrSkip = errors.New("mapping: the record is filtered out (where)")

// CheckError is the error of a record that a Check refuses. The record is poison.
type CheckError struct {
	Expr    string // the check's expression
	Message string // the check's message; "" when it has none
}

func (e *CheckError) Error() string {
	if e.Message != "" {
		return "mapping: check failed: " + e.Message
	}
	return "mapping: check failed: " + e.Expr
}

// Check is a condition every record must meet: Expr, a bool expression, is true, or the
// record is poison with Message (a *CheckError).
type Check struct {
	Expr    *Expr
	Message string // Defaults to "": the error quotes the expression.
}

// Expr is a compiled CEL expression (cel.dev/cel-go) over a record. Its variables are key
// and value (the sides decoded with their formats: json gives a tree of maps, lists,
// strings, int or double numbers, bools and null; string gives a string; bytes gives
// bytes; a null side is null), headers (map<string, string>, the last value of each
// header; a header whose last value is null is absent), topic (string), partition and
// offset (int) and timestamp (timestamp). The cel-go strings extension is on (replace,
// split, lowerAscii, trim, substring, indexOf...). An Expr is read-only once compiled and
// may run on many goroutines at once.
type Expr struct {
	text string
	prg  cel.Program // metered: stops at ExprCostLimit
	// small runs without metering on records of at most exprSmallRecord bytes: the
	// expression's worst case on such a record is within ExprCostLimit. Nil when it is not.
	small cel.Program
	key   bool // it reads key
	value bool // it reads value
	bool  bool // compiled as a condition: it must give a bool
}

// String returns the expression as written.
func (e *Expr) String() string { return e.text }

// exprEnv is the environment every expression compiles in.
var exprEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("key", cel.DynType),
		cel.Variable("value", cel.DynType),
		cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("topic", cel.StringType),
		cel.Variable("partition", cel.IntType),
		cel.Variable("offset", cel.IntType),
		cel.Variable("timestamp", cel.TimestampType),
		ext.Strings(),
		ext.Encoders(),
	)
})

// CompileExpr parses and type-checks a value expression: what it gives is a column's
// value (see the package documentation for the conversion to text).
func CompileExpr(text string) (*Expr, error) { return compile(text, false) }

// CompileCondition is CompileExpr for a condition (a where or a check): an expression
// whose type is bool, or dyn (a field of key or value), which must then give a bool.
func CompileCondition(text string) (*Expr, error) { return compile(text, true) }

func compile(text string, condition bool) (*Expr, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("empty expression")
	}
	env, err := exprEnv()
	if err != nil {
		return nil, fmt.Errorf("expression environment: %w", err)
	}
	ast, iss := env.Compile(text)
	if iss.Err() != nil {
		return nil, compileError(iss)
	}
	if condition {
		if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
			return nil, fmt.Errorf("the expression gives %s, not bool", t)
		}
	}
	prg, err := env.Program(ast, cel.CostLimit(ExprCostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, err
	}
	e := &Expr{text: text, prg: prg, bool: condition}
	if est, err := env.EstimateCost(ast, smallRecord{}); err == nil && est.Max <= ExprCostLimit {
		if e.small, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize)); err != nil {
			return nil, err
		}
	}
	for _, r := range ast.NativeRep().ReferenceMap() {
		switch r.Name {
		case "key":
			e.key = true
		case "value":
			e.value = true
		}
	}
	return e, nil
}

// compileError is the issues of a compilation on one line: "1:7: undeclared reference to
// 'x'; ...", without the source excerpt cel-go adds.
func compileError(iss *cel.Issues) error {
	var msgs []string
	for _, e := range iss.Errors() {
		msg := e.Message
		if l := e.Location; l != nil && l.Line() > 0 {
			msg = fmt.Sprintf("%d:%d: %s", l.Line(), l.Column()+1, msg)
		}
		msgs = append(msgs, msg)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// exprSmallRecord is the size of a record (key, value and headers) up to which an
// expression whose worst case on such a record is within ExprCostLimit runs unmetered;
// metering costs about a third of a simple expression's time.
const exprSmallRecord = 32 << 10

// smallRecord is a cost.Estimator for records of up to exprSmallRecord bytes: every value
// read from the record (a string, bytes, a list or a map) is at most that long.
type smallRecord struct{}

func (smallRecord) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

func (smallRecord) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if n.ComputedSize() != nil {
		return nil
	}
	return &cost.SizeEstimate{Min: 0, Max: exprSmallRecord}
}

// eval evaluates e on in, whose sides e reads must be decoded (in.prepare).
func (e *Expr) eval(in *exprInput) (ref.Val, error) {
	prg := e.prg
	if e.small != nil && in.small() {
		prg = e.small
	}
	out, _, err := prg.Eval(in)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrExpr, err)
	}
	return out, nil
}

// condition evaluates e, a condition, on in.
func (e *Expr) condition(in *exprInput) (bool, error) {
	out, err := e.eval(in)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("%w: %s gives %s, not bool", ErrExpr, e.text, out.Type().(ref.Type).TypeName())
	}
	return bool(b), nil
}

// reads reports whether some of exprs reads the key and the value.
func readsSides(exprs ...*Expr) (key, value bool) {
	for _, e := range exprs {
		if e != nil {
			key, value = key || e.key, value || e.value
		}
	}
	return key, value
}
