package charttest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Object is one rendered manifest, decoded into its typed struct.
type Object struct {
	Kind, APIVersion string
	Meta             metav1.ObjectMeta
	Obj              any // *appsv1.Deployment, *corev1.ConfigMap, ...
}

// ID names the object in messages: Kind/name.
func (o Object) ID() string { return o.Kind + "/" + o.Meta.Name }

// kinds are the objects the chart may render, each with its typed struct. Anything else is an
// error: an object the check does not know is an object it does not check.
var kinds = map[string]func() any{
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                     func() any { return &appsv1.StatefulSet{} },
	"batch/v1/Job":                            func() any { return &batchv1.Job{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
}

// Decode splits a stream of YAML documents (helm template's output) and decodes each one
// strictly: a duplicate key, a field the type does not have (in any letter case), or a value
// of the wrong type is an error naming the document. Empty documents are skipped.
func Decode(stream []byte) ([]Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []Object
	var errs []error
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		o, empty, err := decodeOne(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d (%s): %w", n, firstLine(doc), err))
			continue
		}
		if !empty {
			objs = append(objs, o)
		}
	}
	return objs, errors.Join(errs...)
}

func decodeOne(doc []byte) (o Object, empty bool, err error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return o, false, err
	}
	if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
		return o, true, nil
	}
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
		return o, false, err
	}
	newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return o, false, fmt.Errorf("apiVersion %q kind %q is not an object the chart renders", tm.APIVersion, tm.Kind)
	}
	obj := newObj()
	strict, err := kjson.UnmarshalStrict(j, obj)
	if err != nil {
		return o, false, err
	}
	if len(strict) > 0 {
		return o, false, errors.Join(strict...)
	}
	meta, err := metaOf(obj)
	if err != nil {
		return o, false, err
	}
	return Object{Kind: tm.Kind, APIVersion: tm.APIVersion, Meta: meta, Obj: obj}, false, nil
}

func metaOf(obj any) (metav1.ObjectMeta, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return metav1.ObjectMeta{}, fmt.Errorf("%T has no metadata", obj)
	}
	return metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), Labels: m.GetLabels(), Annotations: m.GetAnnotations()}, nil
}

// firstLine names a document: helm's "# Source: FILE" comment, else its first line that is
// not a comment or "---".
func firstLine(doc []byte) string {
	first := ""
	for _, l := range bytes.Split(doc, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if src, ok := bytes.CutPrefix(l, []byte("# Source: ")); ok {
			return string(src)
		}
		if first == "" && len(l) > 0 && l[0] != '#' && !bytes.Equal(l, []byte("---")) {
			first = string(l)
		}
	}
	if first == "" {
		return "empty"
	}
	return first
}
