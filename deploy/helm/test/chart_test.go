package charttest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

const chartDir = "../eosink"

// kubeVersion is the cluster version helm lint and template assume: a helm built with go
// install assumes v1.20, below the chart's kubeVersion.
const kubeVersion = "1.33.0"

// helm returns the helm binary named by HELM. Its absence is a failure, not a skip.
func helm(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		t.Fatal("HELM is not set: run `make helm-test`, which builds helm from the Go module proxy into ~/.cache/eosink and sets it")
	}
	if _, err := exec.LookPath(h); err != nil {
		t.Fatalf("HELM=%s: %v", h, err)
	}
	return h
}

func runHelm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stderr.String(), out.String())
	}
	return out.Bytes(), nil
}

// render runs helm template on chart with args and decodes and checks its output.
func render(t *testing.T, chart string, args ...string) ([]Object, error) {
	t.Helper()
	out, err := runHelm(t, append([]string{"template", "sink", chart, "--namespace", "streams", "--kube-version", kubeVersion}, args...)...)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(out)
	if err != nil {
		return nil, err
	}
	if err := Check(objs); err != nil {
		return objs, err
	}
	return objs, validateConfigs(t, objs)
}

func valuesFile(name string) string { return filepath.Join(chartDir, "ci", name) }

// The value sets of the chart's ci/ folder, one by one and together.
var valueSets = []struct {
	name  string
	args  []string
	kinds []string // every kind rendered, sorted
	check func(t *testing.T, objs []Object)
}{
	{
		name:  "default",
		kinds: []string{"ConfigMap", "ConfigMap", "Deployment", "Job", "PodDisruptionBudget", "Service"},
		check: func(t *testing.T, objs []Object) {
			d := get[*appsv1.Deployment](t, objs, "Deployment", "sink-eosink")
			if *d.Spec.Replicas != 2 || *d.Spec.Template.Spec.TerminationGracePeriodSeconds != 60 {
				t.Errorf("replicas %d, grace %d; want 2 and 30+30", *d.Spec.Replicas, *d.Spec.Template.Spec.TerminationGracePeriodSeconds)
			}
			cfg := get[*corev1.ConfigMap](t, objs, "ConfigMap", "sink-eosink").Data["pipeline.yaml"]
			for _, want := range []string{"http: :9464", "shutdown: 30s", "url: ${DATABASE_URL}"} {
				if !strings.Contains(cfg, want) {
					t.Errorf("pipeline.yaml lacks %q:\n%s", want, cfg)
				}
			}
		},
	},
	{
		name:  "static membership",
		args:  []string{"-f", valuesFile("static-values.yaml")},
		kinds: []string{"ConfigMap", "ConfigMap", "Job", "PodDisruptionBudget", "Service", "StatefulSet"},
		check: func(t *testing.T, objs []Object) {
			s := get[*appsv1.StatefulSet](t, objs, "StatefulSet", "sink-eosink")
			if *s.Spec.Replicas != 3 || s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
				t.Errorf("replicas %d, policy %s", *s.Spec.Replicas, s.Spec.PodManagementPolicy)
			}
			cfg := get[*corev1.ConfigMap](t, objs, "ConfigMap", "sink-eosink").Data["pipeline.yaml"]
			for _, want := range []string{"group.instance.id: ${POD_NAME}", `session.timeout.ms: "60000"`} {
				if !strings.Contains(cfg, want) {
					t.Errorf("pipeline.yaml lacks %q:\n%s", want, cfg)
				}
			}
		},
	},
	{
		name:  "ServiceMonitor",
		args:  []string{"-f", valuesFile("servicemonitor-values.yaml")},
		kinds: []string{"ConfigMap", "ConfigMap", "Deployment", "Job", "PodDisruptionBudget", "Service", "ServiceMonitor"},
		check: func(t *testing.T, objs []Object) {
			sm := get[*monitoringv1.ServiceMonitor](t, objs, "ServiceMonitor", "sink-eosink")
			if sm.Labels["release"] != "prometheus" || sm.Spec.Endpoints[0].Interval != "15s" {
				t.Errorf("labels %v, interval %s", sm.Labels, sm.Spec.Endpoints[0].Interval)
			}
		},
	},
	{
		name:  "PrometheusRule",
		args:  []string{"-f", valuesFile("prometheusrule-values.yaml")},
		kinds: []string{"ConfigMap", "ConfigMap", "Deployment", "Job", "PodDisruptionBudget", "PrometheusRule", "Service"},
		check: func(t *testing.T, objs []Object) {
			pr := get[*monitoringv1.PrometheusRule](t, objs, "PrometheusRule", "sink-eosink")
			if pr.Labels["release"] != "prometheus" || len(pr.Spec.Groups) != 1 || len(pr.Spec.Groups[0].Rules) != 5 {
				t.Errorf("labels %v, groups %+v", pr.Labels, pr.Spec.Groups)
			}
		},
	},
	{
		name:  "secrets",
		args:  []string{"-f", valuesFile("secrets-values.yaml")},
		kinds: []string{"ConfigMap", "ConfigMap", "Deployment", "Job", "PodDisruptionBudget", "Service"},
		check: func(t *testing.T, objs []Object) {
			d := get[*appsv1.Deployment](t, objs, "Deployment", "sink-eosink")
			j := get[*batchv1.Job](t, objs, "Job", "sink-eosink-migrate")
			if got := secretNames(d.Spec.Template.Spec); !slices.Equal(got, []string{"eosink-kafka", "eosink-run-database", "eosink-tls"}) {
				t.Errorf("the sink mounts secrets %v", got)
			}
			if got := secretNames(j.Spec.Template.Spec); !slices.Equal(got, []string{"eosink-kafka", "eosink-migrate-database", "eosink-tls"}) {
				t.Errorf("the migrations Job mounts secrets %v", got)
			}
			// The config replaces the default one whole: nothing of the example is merged in.
			if cfg := get[*corev1.ConfigMap](t, objs, "ConfigMap", "sink-eosink").Data["pipeline.yaml"]; strings.Contains(cfg, "order_id") || strings.Contains(cfg, "on_poison") {
				t.Errorf("pipeline.yaml has keys of the default config:\n%s", cfg)
			}
			if g := *d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != 90 {
				t.Errorf("grace %d, want 90", g)
			}
			if p := d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Scheme; p != corev1.URISchemeHTTPS {
				t.Errorf("probe scheme %s, want HTTPS", p)
			}
		},
	},
	{
		name:  "NetworkPolicy",
		args:  []string{"-f", valuesFile("networkpolicy-values.yaml")},
		kinds: []string{"ConfigMap", "ConfigMap", "Deployment", "Job", "NetworkPolicy", "PodDisruptionBudget", "Service"},
		check: func(t *testing.T, objs []Object) {
			np := get[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "sink-eosink")
			if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].NamespaceSelector == nil ||
				np.Spec.Ingress[0].Ports[0].Port.String() != "http" {
				t.Errorf("ingress %+v, want one rule from the monitoring namespace to port http", np.Spec.Ingress)
			}
		},
	},
	{
		name:  "NetworkPolicy without peers denies all ingress",
		args:  []string{"--set", "networkPolicy.enabled=true"},
		kinds: []string{"ConfigMap", "ConfigMap", "Deployment", "Job", "NetworkPolicy", "PodDisruptionBudget", "Service"},
		check: func(t *testing.T, objs []Object) {
			np := get[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "sink-eosink")
			if np.Spec.Ingress == nil || len(np.Spec.Ingress) != 0 {
				t.Errorf("ingress %+v, want an empty list", np.Spec.Ingress)
			}
		},
	},
	{
		name: "all together, without the Job and the PodDisruptionBudget",
		args: []string{"-f", valuesFile("static-values.yaml"), "-f", valuesFile("servicemonitor-values.yaml"),
			"-f", valuesFile("secrets-values.yaml"), "-f", valuesFile("prometheusrule-values.yaml"), "--set", "migrations.enabled=false,podDisruptionBudget.enabled=false"},
		kinds: []string{"ConfigMap", "PrometheusRule", "Service", "ServiceMonitor", "StatefulSet"},
	},
}

func TestLint(t *testing.T) {
	if out, err := runHelm(t, "lint", "--strict", "--kube-version", kubeVersion, chartDir); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("%s", out)
	}
	for _, vs := range valueSets[1:] {
		if _, err := runHelm(t, append([]string{"lint", "--strict", "--kube-version", kubeVersion, chartDir}, vs.args...)...); err != nil {
			t.Errorf("%s: %v", vs.name, err)
		}
	}
}

func TestTemplate(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs, err := render(t, chartDir, vs.args...)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.Kind)
			}
			slices.Sort(kinds)
			if !slices.Equal(kinds, vs.kinds) {
				t.Errorf("rendered %v, want %v", kinds, vs.kinds)
			}
			if vs.check != nil {
				vs.check(t, objs)
			}
		})
	}
}

// Values that contradict each other are refused by helm template, with the reason.
func TestTemplateRefuses(t *testing.T) {
	const cfg = "config: |\n  kafka: {brokers: b, group: g, topics: [t]%s}\n  database: {url: u}\n  sink: {type: table, table: t}\n%s"
	for _, tc := range []struct{ name, values, want string }{
		{"grace period at the drain", fmt.Sprintf(cfg, "", "") + "terminationGracePeriodSeconds: 30\n", "must be above shutdownTimeoutSeconds"},
		{"timeouts.shutdown by hand", fmt.Sprintf(cfg, "", "  timeouts: {shutdown: 10s}\n"), "set shutdownTimeoutSeconds instead"},
		{"group.instance.id by hand", fmt.Sprintf(cfg, ", properties: {group.instance.id: sink-1}", ""), "choose membership: static"},
		{"http on another port", fmt.Sprintf(cfg, "", "  http: 127.0.0.1:9000\n"), "make them equal"},
		{"unknown membership", "membership: sticky\n", "membership"},
		{"config not a mapping", "config: oops\n", "config is not a YAML mapping"},
		{"config as a mapping", "config: {kafka: {group: g}}\n", "config"},
		{"misspelled value", "replica: 3\n", "replica"}, // values.schema.json allows no unknown keys
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(f, []byte(tc.values), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := runHelm(t, "template", "sink", chartDir, "--kube-version", kubeVersion, "-f", f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template with\n%s: %v; want an error with %q", tc.values, err, tc.want)
			}
		})
	}
}

// The checks catch broken charts: each mutation of a copy of the chart must be refused, by
// helm or by Decode and Check, with the expected message.
func TestBrokenChartIsCaught(t *testing.T) {
	for _, tc := range []struct {
		name, file, old, new string
		args                 []string
		want                 string
	}{
		{"readiness probe path", "templates/_pod.tpl", "path: /readyz", "path: /ready", nil, "readiness probe path"},
		{"misspelled field", "templates/_pod.tpl", "readinessProbe:", "readynessProbe:", nil, `unknown field "spec.template.spec.containers[0].readynessProbe"`},
		{"port as a string", "templates/_pod.tpl", "containerPort: {{ .Values.http.port }}", `containerPort: "{{ .Values.http.port }}"`, nil, "containerPort"},
		{"probe port without a container port", "templates/_pod.tpl", "- name: http\n", "- name: metrics\n", nil, `probe port "http" is not a container port`},
		{"grace period equal to the drain", "templates/_helpers.tpl", "add $drain 30", "add $drain 0", nil, "is not above timeouts.shutdown"},
		{"writable root filesystem", "values.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", nil, "readOnlyRootFilesystem is not true"},
		{"static membership without group.instance.id", "templates/_helpers.tpl", `"group.instance.id" "${POD_NAME}"`, `"group.instance.id" "sink"`,
			[]string{"-f", filepath.Join("ci", "static-values.yaml")}, "needs kafka.properties.group.instance.id"},
		{"migrations ConfigMap created after the Job", "templates/migrations-job.yaml", `helm.sh/hook-weight: "-10"`, `helm.sh/hook-weight: "5"`, nil, "hook-weight 5 is not below the Job's 0"},
		{"migrations ConfigMap not a hook", "templates/migrations-job.yaml", "    helm.sh/hook: pre-install,pre-upgrade\n    helm.sh/hook-weight: \"-10\"\n", "", nil, "is not a pre-install,pre-upgrade hook"},
		{"a key eosink does not know", "templates/_helpers.tpl", `set $t "shutdown" (printf`, `set $t "shutdwn" (printf`, nil, "timeouts.shutdwn: unknown key"},
		{"probes in HTTP to a TLS endpoint", "templates/_helpers.tpl", `$c.http.tls -}}HTTPS`, `$c.http.tls -}}HTTP`,
			[]string{"-f", filepath.Join("ci", "secrets-values.yaml")}, `probe scheme "HTTP", but eosink serves HTTPS`},
		{"a volume name the API refuses", "values.yaml", "secretMounts: []", "secretMounts: [{name: Database, secretName: db, mountPath: /run/secrets/db}]", nil, `volume name "Database"`},
		{"an alert on a metric the sink does not export", "templates/_rules.tpl", "(eosink_partition_stopped) > 0", "(eosink_partitions_stopped) > 0",
			[]string{"--set", "prometheusRule.enabled=true"}, "eosink_partitions_stopped is not a metric the sink exports"},
		{"an alert expression that does not parse", "templates/_rules.tpl", "(eosink_partition_lag) >", "(eosink_partition_lag) >>",
			[]string{"--set", "prometheusRule.enabled=true"}, "does not parse"},
		{"a misspelled field of a rule", "templates/_rules.tpl", "      for: {{ .lag.for }}", "      fr: {{ .lag.for }}",
			[]string{"--set", "prometheusRule.enabled=true"}, `unknown field "spec.groups[0].rules[0].fr"`},
		{"an annotation that does not parse", "templates/_rules.tpl", "{{ $value | humanizeDuration }}", "{{ $value | humanizeDuration }",
			[]string{"--set", "prometheusRule.enabled=true"}, "annotation summary"},
		{"selector not matching the pods", "templates/deployment.yaml", `{{- include "eosink.selectorLabels" . | nindent 6 }}`, "app: other", nil, "does not select the pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyChart(t)
			f := filepath.Join(dir, tc.file)
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(tc.old)) {
				t.Fatalf("%s has no %q: the mutation is stale", tc.file, tc.old)
			}
			if err := os.WriteFile(f, bytes.Replace(b, []byte(tc.old), []byte(tc.new), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			var args []string
			for _, a := range tc.args {
				if strings.HasPrefix(a, "ci") {
					a = filepath.Join(dir, a)
				}
				args = append(args, a)
			}
			_, err = render(t, dir, args...)
			if err == nil {
				t.Fatalf("the broken chart passed; want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant one with %q", err, tc.want)
			}
			t.Logf("caught: %s", firstErrorLine(err, tc.want))
		})
	}
}

func copyChart(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "eosink")
	if err := os.CopyFS(dst, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func get[T any](t *testing.T, objs []Object, kind, name string) T {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Meta.Name == name {
			return o.Obj.(T)
		}
	}
	t.Fatalf("no %s/%s rendered", kind, name)
	var zero T
	return zero
}

func secretNames(spec corev1.PodSpec) []string {
	var names []string
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			names = append(names, v.Secret.SecretName)
		}
	}
	slices.Sort(names)
	return names
}

func firstErrorLine(err error, want string) string {
	for _, l := range strings.Split(err.Error(), "\n") {
		if strings.Contains(l, want) {
			return l
		}
	}
	return errors.Unwrap(err).Error()
}

// The values example of docs/deploy.md renders, passes the checks and loads in eosink.
func TestDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(doc, []byte("A pipeline over TLS with its secrets as files"))
	if ok {
		_, rest, ok = bytes.Cut(rest, []byte("```yaml\n"))
	}
	var example []byte
	if ok {
		example, _, ok = bytes.Cut(rest, []byte("```\n"))
	}
	if !ok {
		t.Fatal("docs/deploy.md: no yaml block after \"A pipeline over TLS with its secrets as files\"")
	}
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, example, 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := render(t, chartDir, "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	j := get[*batchv1.Job](t, objs, "Job", "sink-eosink-migrate")
	if got := secretNames(j.Spec.Template.Spec); !slices.Equal(got, []string{"eosink-kafka", "eosink-migrate-database"}) {
		t.Errorf("the migrations Job mounts secrets %v", got)
	}
}
