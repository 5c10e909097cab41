package pgerr

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestConnStringSecrets(t *testing.T) {
	cases := []struct{ conn, secret string }{
		{"host=h password=plain1 sslmode=bogus", "plain1"},
		{"host=h password = spaced2 sslmode=bogus", "spaced2"},
		{"host=h password\t=\ttabbed3", "tabbed3"},
		{`host=h password='a\'quoted4' sslmode=bogus`, `a'quoted4`},
		{`host=h password = 'with space5' x=y`, "with space5"},
		{`host=h password=a\ escaped6 x=y`, "a escaped6"},
		{`host=h PASSWORD=upper7`, "upper7"},
		{`host=h sslpassword=key8`, "key8"},
		{"postgres://u:user9@h:1/x?sslmode=bogus", "user9"},
		{"postgresql://u@h/x?password=query10&sslmode=bogus", "query10"},
		{"postgres://u:enc%2D11@h/x", "enc-11"},
		{"POSTGRES://u:upper12@h/x", "upper12"},
		{"postgres://u:p@ss13@h/x", "p@ss13"},
		{"postgres://u:port14@h:notaport/x", "port14"},
		{"postgres://u@h/x?pass%77ord=enc15", "enc15"},
	}
	for _, c := range cases {
		got := ConnStringSecrets(c.conn)
		found := false
		for _, s := range got {
			found = found || s == c.secret
		}
		if !found {
			t.Errorf("ConnStringSecrets(%q) = %q, want %q among them", c.conn, got, c.secret)
		}
		if r := RedactConnString(c.conn); strings.Contains(r, strings.Fields(c.secret)[len(strings.Fields(c.secret))-1]) {
			t.Errorf("RedactConnString(%q) = %q", c.conn, r)
		}
	}
}

func TestRedactErrorRebuildsPgxParseErrors(t *testing.T) {
	conn := `host=h password=a\ leak sslmode=bogus`
	_, err := pgconn.ParseConfig(conn)
	if err == nil || !strings.Contains(err.Error(), "leak") {
		t.Fatalf("pgx's message no longer shows this password (%v): the test needs another form", err)
	}
	red := RedactError(err, conn)
	if strings.Contains(red.Error(), "leak") || !strings.Contains(red.Error(), "sslmode is invalid") {
		t.Fatalf("redacted: %q", red)
	}
	var pe *pgconn.ParseConfigError
	if !errors.As(red, &pe) {
		t.Fatal("the redacted error no longer unwraps to pgx's")
	}
}

// FuzzRedactConnString: whatever the string, RedactText of it leaves none of the passwords
// ConnStringSecrets finds in it (of minSecret bytes or more; those holding the mask's "x"
// excepted, which a replacement can recreate), and RedactConnString never panics.
func FuzzRedactConnString(f *testing.F) {
	f.Add("host=h password='a\\'b' x=1")
	f.Add("postgres://u:pw@h/x?password=q")
	f.Add("password = 'with space' sslpassword=k")
	f.Fuzz(func(t *testing.T, s string) {
		_ = RedactConnString(s)
		r := RedactText(s, s)
		for _, secret := range ConnStringSecrets(s) {
			if len(secret) >= minSecret && !strings.Contains(secret, "x") && strings.Contains(r, secret) {
				t.Fatalf("RedactText(%q) = %q still holds %q", s, r, secret)
			}
		}
	})
}
