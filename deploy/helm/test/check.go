package charttest

import (
	"errors"
	"fmt"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The paths and arguments the chart promises.
const (
	configPath    = "/etc/eosink/pipeline.yaml"
	livenessPath  = "/healthz"
	readinessPath = "/readyz"
	hookEvents    = "pre-install,pre-upgrade"
)

// Check runs the checks that typed decoding cannot on one rendering of the chart, and returns
// every problem found.
func Check(objs []Object) error {
	c := &checker{objs: objs}
	c.run()
	return errors.Join(c.errs...)
}

type checker struct {
	objs   []Object
	errs   []error
	scheme string // http or https: what the workload's eosink serves
}

func (c *checker) errorf(o Object, format string, a ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s", o.ID(), fmt.Sprintf(format, a...)))
}

func (c *checker) run() {
	var workloads []Object
	seen := map[string]bool{}
	for _, o := range c.objs {
		c.checkMeta(o)
		if seen[o.ID()] {
			c.errorf(o, "rendered twice")
		}
		seen[o.ID()] = true
		switch o.Obj.(type) {
		case *appsv1.Deployment, *appsv1.StatefulSet:
			workloads = append(workloads, o)
		}
	}
	if len(workloads) != 1 {
		c.errs = append(c.errs, fmt.Errorf("want exactly one Deployment or StatefulSet, got %d", len(workloads)))
		return
	}
	w := workloads[0]
	pod := c.checkWorkload(w)
	for _, o := range c.objs {
		switch obj := o.Obj.(type) {
		case *corev1.Service:
			c.checkService(o, obj, pod)
		case *policyv1.PodDisruptionBudget:
			c.checkSelector(o, obj.Spec.Selector, pod.Labels)
			if obj.Spec.MaxUnavailable == nil && obj.Spec.MinAvailable == nil {
				c.errorf(o, "neither maxUnavailable nor minAvailable")
			}
		case *monitoringv1.ServiceMonitor:
			c.checkServiceMonitor(o, obj)
		case *monitoringv1.PrometheusRule:
			if err := checkRuleGroups(obj.Spec.Groups); err != nil {
				c.errorf(o, "%v", err)
			}
		case *networkingv1.NetworkPolicy:
			c.checkNetworkPolicy(o, obj, pod)
		case *batchv1.Job:
			c.checkJob(o, obj)
		}
	}
}

func (c *checker) checkMeta(o Object) {
	m := o.Meta
	for _, e := range validation.IsDNS1123Subdomain(m.Name) {
		c.errorf(o, "name %q: %s", m.Name, e)
	}
	if _, ok := o.Obj.(*corev1.Service); ok {
		for _, e := range validation.IsDNS1035Label(m.Name) {
			c.errorf(o, "Service name %q: %s", m.Name, e)
		}
	}
	for k, v := range m.Labels {
		for _, e := range validation.IsQualifiedName(k) {
			c.errorf(o, "label key %q: %s", k, e)
		}
		for _, e := range validation.IsValidLabelValue(v) {
			c.errorf(o, "label %s value %q: %s", k, v, e)
		}
	}
	for k := range m.Annotations {
		for _, e := range validation.IsQualifiedName(k) {
			c.errorf(o, "annotation key %q: %s", k, e)
		}
	}
}

// checkWorkload checks the Deployment or StatefulSet and returns its pod template.
func (c *checker) checkWorkload(o Object) corev1.PodTemplateSpec {
	var tpl corev1.PodTemplateSpec
	var sel *metav1.LabelSelector
	var static bool
	switch w := o.Obj.(type) {
	case *appsv1.Deployment:
		tpl, sel = w.Spec.Template, w.Spec.Selector
		if w.Spec.Replicas == nil || *w.Spec.Replicas < 1 {
			c.errorf(o, "replicas unset or below 1")
		}
	case *appsv1.StatefulSet:
		tpl, sel, static = w.Spec.Template, w.Spec.Selector, true
		if w.Spec.ServiceName == "" || c.find("Service", w.Spec.ServiceName) == nil {
			c.errorf(o, "serviceName %q names no rendered Service", w.Spec.ServiceName)
		}
		if w.Spec.Replicas == nil || *w.Spec.Replicas < 1 {
			c.errorf(o, "replicas unset or below 1")
		}
	}
	c.checkSelector(o, sel, tpl.Labels)
	spec := tpl.Spec
	if len(spec.Containers) != 1 {
		c.errorf(o, "want one container, got %d", len(spec.Containers))
		return tpl
	}
	ctr := spec.Containers[0]
	c.checkPod(o, spec, ctr)
	if want := []string{"run", "-config", configPath}; !slices.Equal(ctr.Args, want) {
		c.errorf(o, "args %q, want %q", ctr.Args, want)
	}
	cfg := c.pipelineConfig(o, spec, ctr)
	c.checkProbe(o, ctr, ctr.LivenessProbe, "liveness", livenessPath)
	c.checkProbe(o, ctr, ctr.ReadinessProbe, "readiness", readinessPath)
	if ctr.Resources.Requests.Memory().IsZero() || ctr.Resources.Limits.Memory().IsZero() {
		c.errorf(o, "container %s: want a memory request and limit", ctr.Name)
	}
	if cfg == nil {
		return tpl
	}
	// The drain must finish before the kubelet's SIGKILL.
	shutdown := 30 * time.Second // timeouts.shutdown's default (docs/pipeline-config.md)
	if s, ok := lookup(cfg, "timeouts", "shutdown").(string); ok {
		d, err := time.ParseDuration(s)
		if err != nil {
			c.errorf(o, "pipeline.yaml timeouts.shutdown %q: %v", s, err)
		}
		shutdown = d
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= shutdown {
		c.errorf(o, "terminationGracePeriodSeconds %v is not above timeouts.shutdown %s", ptrValue(g), shutdown)
	}
	// The metrics and probes address is the container's port.
	listen, _ := lookup(cfg, "http").(string)
	if listen == "" {
		listen, _ = lookup(cfg, "http", "listen").(string)
	}
	if _, port, err := net.SplitHostPort(listen); err != nil {
		c.errorf(o, "pipeline.yaml http %q: %v", listen, err)
	} else if p, _ := strconv.Atoi(port); containerPort(ctr, "http") != int32(p) {
		c.errorf(o, "pipeline.yaml http listens on %s, the container port http is %d", port, containerPort(ctr, "http"))
	}
	// HTTPS exactly when eosink serves TLS.
	want := corev1.URISchemeHTTP
	if lookup(cfg, "http", "tls") != nil {
		want = corev1.URISchemeHTTPS
	}
	for _, p := range []*corev1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe} {
		if p != nil && p.HTTPGet != nil && p.HTTPGet.Scheme != want {
			c.errorf(o, "container %s: probe scheme %q, but eosink serves %s", ctr.Name, p.HTTPGet.Scheme, want)
		}
	}
	c.scheme = strings.ToLower(string(want))
	gid, hasGID := lookup(cfg, "kafka", "properties", "group.instance.id").(string)
	switch {
	case static && gid != "${POD_NAME}":
		c.errorf(o, "a StatefulSet (static membership) needs kafka.properties.group.instance.id: ${POD_NAME}, got %q", gid)
	case !static && hasGID:
		c.errorf(o, "a Deployment's pods would share group.instance.id %q", gid)
	}
	return tpl
}

// checkPod checks what the workload and the migrations Job share: security, environment,
// volumes and the config file.
func (c *checker) checkPod(o Object, spec corev1.PodSpec, ctr corev1.Container) {
	if ctr.Image == "" || !strings.Contains(ctr.Image, ":") {
		c.errorf(o, "container %s: image %q has no tag", ctr.Name, ctr.Image)
	}
	psc, sc := spec.SecurityContext, ctr.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		c.errorf(o, "container %s: readOnlyRootFilesystem is not true", ctr.Name)
	}
	nonRoot := (sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) ||
		((sc == nil || sc.RunAsNonRoot == nil) && psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
	if !nonRoot {
		c.errorf(o, "container %s: runAsNonRoot is not true", ctr.Name)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		c.errorf(o, "container %s: allowPrivilegeEscalation is not false", ctr.Name)
	}
	if !slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}) {
		c.errorf(o, "container %s: no POD_NAME from metadata.name", ctr.Name)
	}
	c.checkNames(o, spec, ctr)
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		if _, dup := volumes[v.Name]; dup {
			c.errorf(o, "volume %q twice", v.Name)
		}
		volumes[v.Name] = v
		if v.Secret != nil && v.Secret.SecretName == "" {
			c.errorf(o, "volume %q: secret without secretName", v.Name)
		}
	}
	mounted := map[string]bool{}
	for _, m := range ctr.VolumeMounts {
		if _, ok := volumes[m.Name]; !ok {
			c.errorf(o, "container %s: volumeMount %q names no volume", ctr.Name, m.Name)
		}
		if !path.IsAbs(m.MountPath) {
			c.errorf(o, "container %s: volumeMount %q: mountPath %q is not absolute", ctr.Name, m.Name, m.MountPath)
		}
		if mounted[m.MountPath] {
			c.errorf(o, "container %s: two mounts at %s", ctr.Name, m.MountPath)
		}
		mounted[m.MountPath] = true
	}
	for _, p := range []string{"/tmp", path.Dir(configPath)} {
		if !mounted[p] {
			c.errorf(o, "container %s: nothing mounted at %s", ctr.Name, p)
		}
	}
}

// pipelineConfig finds the ConfigMap mounted at the config file's folder and returns its
// pipeline.yaml, parsed; nil after an error.
func (c *checker) pipelineConfig(o Object, spec corev1.PodSpec, ctr corev1.Container) map[string]any {
	var vol string
	for _, m := range ctr.VolumeMounts {
		if m.MountPath == path.Dir(configPath) {
			vol = m.Name
		}
	}
	for _, v := range spec.Volumes {
		if v.Name != vol {
			continue
		}
		if v.ConfigMap == nil {
			c.errorf(o, "volume %q at %s is not a ConfigMap", vol, path.Dir(configPath))
			return nil
		}
		cm := c.find("ConfigMap", v.ConfigMap.Name)
		if cm == nil {
			c.errorf(o, "volume %q: ConfigMap %q is not rendered", vol, v.ConfigMap.Name)
			return nil
		}
		text, ok := cm.Obj.(*corev1.ConfigMap).Data[path.Base(configPath)]
		if !ok {
			c.errorf(*cm, "no key %s", path.Base(configPath))
			return nil
		}
		var cfg map[string]any
		if err := yaml.UnmarshalStrict([]byte(text), &cfg); err != nil {
			c.errorf(*cm, "%s: %v", path.Base(configPath), err)
			return nil
		}
		for _, req := range [][]string{{"kafka", "brokers"}, {"kafka", "group"}, {"kafka", "topics"}, {"database", "url"}, {"sink", "type"}} {
			if lookup(cfg, req...) == nil {
				c.errorf(*cm, "%s: %s is required", path.Base(configPath), strings.Join(req, "."))
			}
		}
		return cfg
	}
	c.errorf(o, "no volume mounted at %s", path.Dir(configPath))
	return nil
}

func (c *checker) checkProbe(o Object, ctr corev1.Container, p *corev1.Probe, what, wantPath string) {
	if p == nil || p.HTTPGet == nil {
		c.errorf(o, "container %s: no HTTP %s probe", ctr.Name, what)
		return
	}
	if p.HTTPGet.Path != wantPath {
		c.errorf(o, "container %s: %s probe path %q, want %s", ctr.Name, what, p.HTTPGet.Path, wantPath)
	}
	if s := p.HTTPGet.Scheme; s != corev1.URISchemeHTTP && s != corev1.URISchemeHTTPS && s != "" {
		c.errorf(o, "container %s: %s probe scheme %q", ctr.Name, what, s)
	}
	if !portOf(ctr, p.HTTPGet.Port.String()) {
		c.errorf(o, "container %s: %s probe port %q is not a container port", ctr.Name, what, p.HTTPGet.Port.String())
	}
}

func (c *checker) checkService(o Object, s *corev1.Service, pod corev1.PodTemplateSpec) {
	if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
		c.errorf(o, "selector %v does not select the pods (labels %v)", s.Spec.Selector, pod.Labels)
	}
	for _, p := range s.Spec.Ports {
		if len(pod.Spec.Containers) == 1 && !portOf(pod.Spec.Containers[0], p.TargetPort.String()) {
			c.errorf(o, "port %s: targetPort %q is not a container port", p.Name, p.TargetPort.String())
		}
	}
}

func (c *checker) checkServiceMonitor(o Object, sm *monitoringv1.ServiceMonitor) {
	var svcs []*corev1.Service
	for _, x := range c.objs {
		if s, ok := x.Obj.(*corev1.Service); ok {
			sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
			if err != nil {
				c.errorf(o, "selector: %v", err)
				return
			}
			if sel.Matches(labels.Set(s.Labels)) {
				svcs = append(svcs, s)
			}
		}
	}
	if len(svcs) == 0 {
		c.errorf(o, "selector %v selects no rendered Service", sm.Spec.Selector)
		return
	}
	if len(sm.Spec.Endpoints) == 0 {
		c.errorf(o, "no endpoints")
	}
	for _, e := range sm.Spec.Endpoints {
		if !slices.ContainsFunc(svcs[0].Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port }) {
			c.errorf(o, "endpoint port %q is not a port of Service %s", e.Port, svcs[0].Name)
		}
		if e.Scheme == nil || strings.ToLower(string(*e.Scheme)) != c.scheme {
			c.errorf(o, "endpoint scheme %v, but eosink serves %s", ptrValue(e.Scheme), c.scheme)
		}
		if e.Path != "/metrics" {
			c.errorf(o, "endpoint path %q, want /metrics", e.Path)
		}
	}
}

func (c *checker) checkJob(o Object, j *batchv1.Job) {
	if o.Meta.Annotations["helm.sh/hook"] != hookEvents {
		c.errorf(o, "helm.sh/hook %q, want %s", o.Meta.Annotations["helm.sh/hook"], hookEvents)
	}
	spec := j.Spec.Template.Spec
	if p := spec.RestartPolicy; p != corev1.RestartPolicyNever && p != corev1.RestartPolicyOnFailure {
		c.errorf(o, "restartPolicy %q", p)
	}
	if len(spec.Containers) != 1 {
		c.errorf(o, "want one container, got %d", len(spec.Containers))
		return
	}
	ctr := spec.Containers[0]
	c.checkPod(o, spec, ctr)
	if want := []string{"migrate", "up", "-config", configPath}; !slices.Equal(ctr.Args, want) {
		c.errorf(o, "args %q, want %q", ctr.Args, want)
	}
	if c.pipelineConfig(o, spec, ctr) == nil {
		return
	}
	// Its ConfigMap must be a hook too, created before it: the release's objects do not
	// exist yet when a pre-install hook runs.
	for _, v := range spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm := c.find("ConfigMap", v.ConfigMap.Name)
		if cm.Meta.Annotations["helm.sh/hook"] != hookEvents {
			c.errorf(o, "ConfigMap %s is not a %s hook, so it does not exist when the Job runs", cm.Meta.Name, hookEvents)
			continue
		}
		jw, _ := strconv.Atoi(o.Meta.Annotations["helm.sh/hook-weight"])
		cw, _ := strconv.Atoi(cm.Meta.Annotations["helm.sh/hook-weight"])
		if cw >= jw {
			c.errorf(o, "ConfigMap %s's hook-weight %d is not below the Job's %d", cm.Meta.Name, cw, jw)
		}
	}
}

func (c *checker) checkSelector(o Object, sel *metav1.LabelSelector, podLabels map[string]string) {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		c.errorf(o, "empty selector")
		return
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		c.errorf(o, "selector: %v", err)
		return
	}
	if !s.Matches(labels.Set(podLabels)) {
		c.errorf(o, "selector %s does not select the pods (labels %v)", s, podLabels)
	}
}

func (c *checker) find(kind, name string) *Object {
	for i := range c.objs {
		if c.objs[i].Kind == kind && c.objs[i].Meta.Name == name {
			return &c.objs[i]
		}
	}
	return nil
}

// portOf reports whether port (a name or a number) is one of ctr's ports.
func portOf(ctr corev1.Container, port string) bool {
	for _, p := range ctr.Ports {
		if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
			return true
		}
	}
	return false
}

func containerPort(ctr corev1.Container, name string) int32 {
	for _, p := range ctr.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// lookup walks nested mappings; nil when a key is missing.
func lookup(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

func ptrValue[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// checkNames applies the API server's rules for the names in a pod that typed decoding does
// not check: container, port, volume and environment variable names, and the names of the
// ConfigMaps and Secrets referenced.
func (c *checker) checkNames(o Object, spec corev1.PodSpec, ctr corev1.Container) {
	report := func(what, name string, errs []string) {
		for _, e := range errs {
			c.errorf(o, "%s %q: %s", what, name, e)
		}
	}
	report("container name", ctr.Name, validation.IsDNS1123Label(ctr.Name))
	for _, p := range ctr.Ports {
		if p.Name != "" {
			report("port name", p.Name, validation.IsValidPortName(p.Name))
		}
		report("containerPort", strconv.Itoa(int(p.ContainerPort)), validation.IsValidPortNum(int(p.ContainerPort)))
	}
	for _, e := range ctr.Env {
		report("environment variable", e.Name, validation.IsEnvVarName(e.Name))
	}
	for _, v := range spec.Volumes {
		report("volume name", v.Name, validation.IsDNS1123Label(v.Name))
		switch {
		case v.ConfigMap != nil:
			report("ConfigMap name", v.ConfigMap.Name, validation.IsDNS1123Subdomain(v.ConfigMap.Name))
		case v.Secret != nil:
			report("Secret name", v.Secret.SecretName, validation.IsDNS1123Subdomain(v.Secret.SecretName))
		}
	}
}
