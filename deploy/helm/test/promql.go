package charttest

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// This file checks PromQL: the alert rules' expressions and the dashboard's queries parse, and
// every metric they select is one the sink exports (ExportedMetrics).

var promql = parser.NewParser(parser.Options{})

// metricNames parses expr and returns the metric names it selects, sorted, each once.
func metricNames(expr string) ([]string, error) {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			if name == "" { // {__name__="..."}
				for _, m := range vs.LabelMatchers {
					if m.Name == model.MetricNameLabel {
						name = m.Value
					}
				}
			}
			names = append(names, name)
		}
		return nil
	})
	slices.Sort(names)
	return slices.Compact(names), nil
}

// checkExpr parses expr and refuses a metric the sink does not export or a selector without
// a metric name. what names the expression in errors.
func checkExpr(what, expr string) error {
	exp, err := ExportedMetrics()
	if err != nil {
		return err
	}
	names, err := metricNames(expr)
	if err != nil {
		return fmt.Errorf("%s: %q does not parse: %w", what, expr, err)
	}
	if len(names) == 0 {
		return fmt.Errorf("%s: %q selects no metric", what, expr)
	}
	var errs []error
	for _, n := range names {
		if _, ok := exp[n]; !ok {
			errs = append(errs, fmt.Errorf("%s: %s is not a metric the sink exports (%q)", what, n, expr))
		}
	}
	return errors.Join(errs...)
}

// checkRuleGroups checks alert rule groups as Prometheus loads them: named groups, unique
// within the file; each rule an alert (the chart records nothing) with a valid name, an
// expression that parses and selects only metrics the sink exports, a duration for `for`,
// label names Prometheus accepts and annotation templates that parse.
func checkRuleGroups(groups []monitoringv1.RuleGroup) error {
	var errs []error
	seen := map[string]bool{}
	if len(groups) == 0 {
		return errors.New("no rule groups")
	}
	for _, g := range groups {
		if g.Name == "" || seen[g.Name] {
			errs = append(errs, fmt.Errorf("group %q: empty or repeated name", g.Name))
		}
		seen[g.Name] = true
		if g.Interval != nil {
			if _, err := model.ParseDuration(string(*g.Interval)); err != nil {
				errs = append(errs, fmt.Errorf("group %s: interval: %w", g.Name, err))
			}
		}
		if len(g.Rules) == 0 {
			errs = append(errs, fmt.Errorf("group %s: no rules", g.Name))
		}
		for i, r := range g.Rules {
			what := fmt.Sprintf("group %s rule %d (%s)", g.Name, i, r.Alert)
			if r.Record != "" || !model.LegacyValidation.IsValidMetricName(r.Alert) {
				errs = append(errs, fmt.Errorf("%s: want an alert with a valid name", what))
			}
			if err := checkExpr(what, r.Expr.String()); err != nil {
				errs = append(errs, err)
			}
			if r.For != nil {
				if _, err := model.ParseDuration(string(*r.For)); err != nil {
					errs = append(errs, fmt.Errorf("%s: for: %w", what, err))
				}
			}
			for k := range r.Labels {
				if !model.LegacyValidation.IsValidLabelName(k) {
					errs = append(errs, fmt.Errorf("%s: label name %q", what, k))
				}
			}
			for k, v := range r.Annotations {
				if !model.LegacyValidation.IsValidLabelName(k) {
					errs = append(errs, fmt.Errorf("%s: annotation name %q", what, k))
				}
				if err := checkTemplate(v); err != nil {
					errs = append(errs, fmt.Errorf("%s: annotation %s: %w", what, k, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// grafanaVar is a dashboard variable in a query: $name, ${name} or [[name]].
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)(:\w+)?\}?|\[\[(\w+)\]\]`)

// grafanaDurations are Grafana's built-in variables that stand for a range.
var grafanaDurations = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

// expandGrafana replaces a dashboard query's variables with what Grafana would put there: a
// range for its built-in range variables, a regular expression for the template variables
// (which the dashboard uses only inside =~ matchers).
func expandGrafana(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		name := strings.Trim(v, "${}[]")
		name, _, _ = strings.Cut(name, ":")
		if d, ok := grafanaDurations[name]; ok {
			return d
		}
		return ".*"
	})
}

// promTemplateFuncs stand for the functions Prometheus gives alert templates, so that an
// annotation that calls one parses; their results do not matter here.
var promTemplateFuncs = func() template.FuncMap {
	m := template.FuncMap{}
	for _, f := range []string{"query", "first", "label", "value", "strvalue", "args", "reReplaceAll", "safeHtml", "match",
		"title", "toUpper", "toLower", "graphLink", "tableLink", "sortByLabel", "stripPort", "stripDomain", "parseDuration",
		"externalURL", "pathPrefix", "humanize", "humanize1024", "humanizeDuration", "humanizePercentage",
		"humanizeTimestamp", "toTime", "toDuration", "now", "urlQueryEscape"} {
		m[f] = func(...any) any { return nil }
	}
	return m
}()

// checkTemplate parses an annotation as Prometheus does, with $labels, $externalLabels and
// $value defined.
func checkTemplate(text string) error {
	_, err := template.New("annotation").Funcs(promTemplateFuncs).Option("missingkey=zero").
		Parse("{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}" + text)
	return err
}
