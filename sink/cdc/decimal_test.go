package cdc

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/sink"
)

// plainEvent is a change event of JSON without schemas with one field n whose JSON is raw.
func plainEvent(t *testing.T, raw string) value {
	t.Helper()
	ev, err := decodeJSONValue([]byte(`{"before":null,"after":{"n":` + raw + `},"source":{"schema":"public","table":"t","lsn":5},"op":"c"}`))
	if err != nil {
		t.Fatal(err)
	}
	return ev.after["n"].value()
}

func convertPlain(t *testing.T, raw, colType, mode string) (any, error) {
	t.Helper()
	v := plainEvent(t, raw)
	v.t.decimals = mode
	return convert(v, colType)
}

// javaBytes is BigInteger.toByteArray: the shortest big-endian two's complement.
func javaBytes(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -n - 1, inverted, in as many bytes as its magnitude needs plus a sign bit.
	m := new(big.Int).Neg(n)
	m.Sub(m, big.NewInt(1))
	b := m.Bytes()
	if len(b) == 0 || b[0]&0x80 != 0 {
		b = append([]byte{0}, b...)
	}
	for i := range b {
		b[i] = ^b[i]
	}
	return b
}

// plainString is BigDecimal.toPlainString of unscaled × 10^-scale.
func plainString(unscaled *big.Int, scale int) string {
	s := new(big.Int).Abs(unscaled).String()
	if scale > 0 {
		if len(s) <= scale {
			s = strings.Repeat("0", scale-len(s)+1) + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if unscaled.Sign() < 0 {
		s = "-" + s
	}
	return s
}

// javaDouble is Double.toString as Jackson writes a double: plain between 10^-3 and 10^7,
// else d.dddE±n.
func javaDouble(f float64) string {
	a := math.Abs(f)
	if a == 0 || a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'E', -1, 64) // 1.5E+07
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}

// Every mode, random values and scales, encoded as Debezium encodes them: the decoded text
// is the value. With the mode unset, a value is decoded right or refused as ambiguous,
// never wrong.
func TestDecimalModesProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 3))
	var ambiguous, n int
	for range 4000 {
		nbytes := 1 + r.IntN(12)
		b := make([]byte, nbytes)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		unscaled := new(big.Int).SetBytes(b)
		if r.IntN(2) == 0 {
			unscaled.Neg(unscaled)
		}
		scale := r.IntN(12)
		col := fmt.Sprintf("numeric(%d,%d)", 38, scale)
		want := plainString(unscaled, scale)
		precise := strconv.Quote(base64.StdEncoding.EncodeToString(javaBytes(unscaled)))
		text := strconv.Quote(want)
		for _, c := range []struct{ mode, raw string }{{DecimalPrecise, precise}, {DecimalString, text}, {"", precise}, {"", text}} {
			n++
			got, err := convertPlain(t, c.raw, col, c.mode)
			var amb *AmbiguousDecimalError
			if c.mode == "" && errors.As(err, &amb) {
				ambiguous++
				continue
			}
			if err != nil || got != want {
				t.Fatalf("mode %q: %s in %s = %v, %v; want %s", c.mode, c.raw, col, got, err, want)
			}
		}
		// double: the connector sends the nearest double; the decoded text is that double.
		f, _ := new(big.Rat).SetFrac(unscaled, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)).Float64()
		for _, mode := range []string{DecimalDouble, ""} {
			n++
			got, err := convertPlain(t, javaDouble(f), col, mode)
			if err != nil {
				t.Fatalf("double %v: %v", f, err)
			}
			if g, err := strconv.ParseFloat(got.(string), 64); err != nil || g != f {
				t.Fatalf("double %v decoded as %v", f, got)
			}
		}
	}
	t.Logf("%d values decoded, %d refused as ambiguous with the mode unset", n, ambiguous)
}

// The values of the issue: precise's "0000" is -29293.56 and "0B00" -31382.52 in a
// numeric(12,2); with the mode unset, "0000" stops (ambiguous) and "0B00" is bytes.
func TestDecimalIssueValues(t *testing.T) {
	col := "numeric(12,2)"
	for _, c := range []struct{ raw, mode, want, err string }{
		{`"0000"`, DecimalPrecise, "-29293.56", ""},
		{`"0B00"`, DecimalPrecise, "-31382.52", ""},
		{`"-29293.56"`, DecimalString, "-29293.56", ""},
		{`-29293.56`, DecimalDouble, "-29293.56", ""},
		{`"0000"`, DecimalString, "0000", ""},
		{`"0000"`, "", "", "ambiguous"},
		{`"0B00"`, "", "-31382.52", ""},
		{`"-29293.56"`, "", "-29293.56", ""},
		{`"NaN"`, "", "NaN", ""},
		{`"NaN"`, DecimalDouble, "NaN", ""},
		{`"Infinity"`, "", "", "ambiguous"},
		{`"Infinity"`, DecimalString, "Infinity", ""},
		{`-29293.56`, DecimalPrecise, "", "never writes"},
		{`"-29293.56"`, DecimalPrecise, "", "not base64"},
		{`"0B00"`, DecimalString, "", "not decimal text"},
		{`"1.5"`, DecimalDouble, "", "only for NaN"},
		{`{"scale":1,"value":"Dw=="}`, DecimalString, "1.5", ""},
		{`""`, "", "", "empty bytes"},
	} {
		got, err := convertPlain(t, c.raw, col, c.mode)
		var amb *AmbiguousDecimalError
		switch {
		case c.err == "ambiguous":
			if !errors.As(err, &amb) || !strings.Contains(err.Error(), "decimal_handling") {
				t.Errorf("%s, mode %q: %v, %v; want an AmbiguousDecimalError", c.raw, c.mode, got, err)
			} else {
				t.Logf("%s: %v", c.raw, err)
			}
		case c.err != "":
			if err == nil || errors.As(err, &amb) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s, mode %q: %v, %v; want an error with %q", c.raw, c.mode, got, err, c.err)
			}
		case err != nil || got != c.want:
			t.Errorf("%s, mode %q: %v, %v; want %s", c.raw, c.mode, got, err, c.want)
		}
	}
}

// Of the 2^24 three-byte unscaled values, those whose base64 is also decimal text: with the
// mode unset each is refused as ambiguous, none read wrong; the rest are read right.
func TestDecimalThreeByteValues(t *testing.T) {
	if testing.Short() {
		t.Skip("2^24 values")
	}
	var amb, ok int
	b := make([]byte, 3)
	for u := range 1 << 24 {
		b[0], b[1], b[2] = byte(u>>16), byte(u>>8), byte(u)
		s := base64.StdEncoding.EncodeToString(b)
		if !isDecimalText(s) {
			ok++
			continue // read as bytes, the only way (checked by the property test)
		}
		_, err := plainDecimalText(s, "numeric(12,2)", "")
		var a *AmbiguousDecimalError
		if !errors.As(err, &a) {
			t.Fatalf("%q: %v, want ambiguous", s, err)
		}
		amb++
	}
	t.Logf("three-byte values: %d decimal text as well as base64 (refused as ambiguous), %d base64 only", amb, ok)
}

func TestDecimalHandlingConfig(t *testing.T) {
	if _, err := New(Config{Table: "replica.${source.table}", DecimalHandling: "exact"}); err == nil || !strings.Contains(err.Error(), "decimal_handling") {
		t.Errorf("decimal_handling: exact: %v", err)
	}
	for _, m := range []string{"", DecimalPrecise, DecimalString, DecimalDouble} {
		if _, err := New(Config{Table: "replica.${source.table}", DecimalHandling: m}); err != nil {
			t.Errorf("decimal_handling: %q: %v", m, err)
		}
	}
}

// An ambiguous decimal stops its partition with the named reason decimal_ambiguous and a
// remedy naming decimal_handling, not the generic handler (it was StopHandler before).
func TestDecimalAmbiguousStopReason(t *testing.T) {
	_, err := convertPlain(t, `"0000"`, "numeric(12,2)", "")
	if !errors.Is(err, ErrDecimalAmbiguous) || !errors.Is(err, sink.ErrDecimalAmbiguous) {
		t.Fatalf("0000 with decimal_handling unset: %v, want an error matching sink.ErrDecimalAmbiguous", err)
	}
	// As the engine sees it: the plugin's Write error (cdc.go wraps it with the record),
	// inside a HandlerError.
	stop := &sink.HandlerError{Topic: "t", Partition: 0, FirstOffset: 5, LastOffset: 9, Err: fmt.Errorf("t[0]@7: %w", err)}
	if r := sink.StopReason(stop); r != "decimal_ambiguous" {
		t.Errorf("StopReason = %q, want decimal_ambiguous", r)
	}
	if rem := engine.StopRemedy(sink.StopDecimal); !strings.Contains(rem, "decimal_handling") {
		t.Errorf("remedy %q does not name decimal_handling", rem)
	}
	if errors.Is(fmt.Errorf("x: %w", errors.New("other")), sink.ErrDecimalAmbiguous) {
		t.Error("an unrelated error matches ErrDecimalAmbiguous")
	}
}
