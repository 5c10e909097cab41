package charttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const (
	rulesFile     = "../../prometheus/eosink-rules.yaml"
	dashboardFile = "../../grafana/eosink.json"
)

// rulesOf returns the groups of the PrometheusRule helm renders with args.
func rulesOf(t *testing.T, args ...string) []monitoringv1.RuleGroup {
	t.Helper()
	objs, err := render(t, chartDir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return get[*monitoringv1.PrometheusRule](t, objs, "PrometheusRule", "sink-eosink").Spec.Groups
}

// readRulesFile decodes a Prometheus rules file strictly: an unknown field is an error.
func readRulesFile(path string) ([]monitoringv1.RuleGroup, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return nil, err
	}
	var f struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	strict, err := kjson.UnmarshalStrict(j, &f)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, errors.Join(strict...)
	}
	return f.Groups, nil
}

// The plain rules file is the chart's PrometheusRule with the default values, and passes
// the same checks.
func TestRulesFileIsTheChartsDefaultRules(t *testing.T) {
	chart := rulesOf(t, "--set", "prometheusRule.enabled=true")
	file, err := readRulesFile(rulesFile)
	if err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	if err := checkRuleGroups(file); err != nil {
		t.Errorf("%s: %v", rulesFile, err)
	}
	a, _ := json.MarshalIndent(chart, "", " ")
	b, _ := json.MarshalIndent(file, "", " ")
	if string(a) != string(b) {
		t.Errorf("%s differs from the chart's PrometheusRule with default values (templates/_rules.tpl, values.yaml): render it again.\nchart:\n%s\nfile:\n%s", rulesFile, a, b)
	}
	var alerts []string
	for _, r := range chart[0].Rules {
		alerts = append(alerts, r.Alert)
	}
	want := "EosinkConsumerLagHigh EosinkPartitionStopped EosinkDeadLetters EosinkDeadLetterBreakerTripped EosinkCommitLatencyHigh"
	if strings.Join(alerts, " ") != want {
		t.Errorf("alerts %v, want %s", alerts, want)
	}
}

// The thresholds of the values reach the expressions.
func TestRulesThresholdsFromValues(t *testing.T) {
	groups := rulesOf(t, "-f", valuesFile("prometheusrule-values.yaml"))
	exprs := map[string]monitoringv1.Rule{}
	for _, r := range groups[0].Rules {
		exprs[r.Alert] = r
	}
	for alert, want := range map[string]string{
		"EosinkConsumerLagHigh":   "(eosink_partition_lag) > 5000",
		"EosinkCommitLatencyHigh": "rate(eosink_commit_seconds_bucket[10m]))) > 0.25",
		"EosinkDeadLetters":       "rate(eosink_dead_letters_total[10m])) > 0",
	} {
		if r := exprs[alert]; !strings.HasSuffix(r.Expr.String(), want) {
			t.Errorf("%s: %q, want it to end with %q", alert, r.Expr.String(), want)
		}
	}
	if f := exprs["EosinkConsumerLagHigh"].For; f == nil || *f != "15m" {
		t.Errorf("EosinkConsumerLagHigh for %v, want 15m", f)
	}
}

// promtool check rules accepts the rules file and the rendered PrometheusRule's groups, where
// make helm-test could build promtool (PROMTOOL names it; unset, this test fails).
func TestPromtoolCheckRules(t *testing.T) {
	p := os.Getenv("PROMTOOL")
	if p == "" {
		t.Fatal("PROMTOOL is not set: run `make helm-test`, which builds promtool from the Go module proxy into ~/.cache/eosink and sets it")
	}
	rendered, err := json.Marshal(map[string]any{"groups": rulesOf(t, "-f", valuesFile("prometheusrule-values.yaml"))})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "rendered-rules.yaml")
	if err := os.WriteFile(f, rendered, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{rulesFile, f} {
		out, err := exec.Command(p, "check", "rules", "--lint=all", "--lint-fatal", file).CombinedOutput()
		if err != nil {
			t.Errorf("promtool check rules %s: %v\n%s", file, err, out)
		} else {
			t.Logf("%s", out)
		}
	}
}

// dashboard is what the checks read of a Grafana dashboard.
type dashboard struct {
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name, Type string
			Query      json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// dashboardExprs returns every query of the dashboard (targets of panels and rows, and the
// template variables' label_values), named for messages.
func dashboardExprs(d dashboard) (map[string]string, error) {
	out := map[string]string{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out[fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, tg.RefID)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			return nil, fmt.Errorf("variable %s: query: %w", v.Name, err)
		}
		sel, ok := strings.CutPrefix(q.Query, "label_values(")
		if i := strings.LastIndex(sel, ","); ok && i > 0 {
			out["variable "+v.Name] = sel[:i] // the series selector
		} else {
			return nil, fmt.Errorf("variable %s: %q is not label_values(SELECTOR, LABEL)", v.Name, q.Query)
		}
	}
	return out, nil
}

func checkDashboard(b []byte) error {
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return err
	}
	if d.Title == "" || len(d.Panels) == 0 {
		return errors.New("no title or no panels")
	}
	exprs, err := dashboardExprs(d)
	if err != nil {
		return err
	}
	var errs []error
	for what, e := range exprs {
		if strings.TrimSpace(e) == "" {
			errs = append(errs, fmt.Errorf("%s: no expr", what))
			continue
		}
		errs = append(errs, checkExpr(what, expandGrafana(e)))
	}
	return errors.Join(errs...)
}

// Every query of the dashboard parses and selects only metrics the sink exports, and the
// dashboard has the panels operators look for.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDashboard(b); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	for _, want := range []string{"eosink_records_applied_total", "eosink_partition_lag", "eosink_partition_lag_seconds", "eosink_partition_stopped",
		"eosink_dead_letters_total", "eosink_dead_letter_breaker_trips_total", "eosink_commit_seconds_bucket",
		"eosink_batch_retries_by_cause_total", `$pipeline`, `$instance`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s has no query of %s", dashboardFile, want)
		}
	}
}

// The checks refuse a metric the sink does not export, in the dashboard and in the rules,
// and a query that does not parse.
func TestUnknownMetricsAreRefused(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ old, new, want string }{
		{"eosink_partition_lag{", "eosink_partition_lags{", "eosink_partition_lags is not a metric the sink exports"},
		{"eosink_commit_seconds_bucket{", "eosink_commit_seconds{", "eosink_commit_seconds is not a metric the sink exports"}, // a histogram's bare name
		{"label_values(eosink_records_applied_total,", "label_values(eosink_records_total,", "eosink_records_total is not a metric"},
		{"sum(rate(eosink_dead_letters_total", "sum(rate(eosink_dead_letters_total))(", "does not parse"},
	} {
		if !strings.Contains(string(b), tc.old) {
			t.Fatalf("the dashboard has no %q: the mutation is stale", tc.old)
		}
		err := checkDashboard([]byte(strings.ReplaceAll(string(b), tc.old, tc.new)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s -> %s: %v, want an error with %q", tc.old, tc.new, err, tc.want)
		}
	}
	groups, err := readRulesFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	groups[0].Rules[0].Expr.StrVal = strings.Replace(groups[0].Rules[0].Expr.StrVal, "eosink_partition_lag", "eosink_lag", 1)
	if err := checkRuleGroups(groups); err == nil || !strings.Contains(err.Error(), "eosink_lag is not a metric the sink exports") {
		t.Errorf("a rule on eosink_lag: %v, want it refused", err)
	}
}
