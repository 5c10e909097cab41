// Package charttest checks eosink's Helm chart (deploy/helm/eosink) offline: helm lint,
// helm template for several value sets, and a schema check of every rendered object.
//
// The schema check decodes each object strictly into the typed structs of k8s.io/api (and of
// the Prometheus Operator for ServiceMonitor): an unknown field, a value of the wrong type or a
// duplicate key is an error, as the API server would refuse them. It then checks what the
// structs cannot: names and labels are valid, selectors select the pods, probes and service
// ports name a container port, mounts name volumes, the config the pods mount exists, and the
// chart's own promises (read-only root filesystem, non-root, a grace period above the drain
// timeout, the migrations hook, group.instance.id under static membership).
//
// The PrometheusRule's alert rules, the plain rules file deploy/prometheus/eosink-rules.yaml
// (equal to the chart's rules with the default values) and the Grafana dashboard
// deploy/grafana/eosink.json are checked too: every expression parses (the PromQL parser of
// github.com/prometheus/prometheus) and selects only metrics the sink registers (sink.New with
// a Registerer, from this checkout through a replace directive), and promtool check rules
// accepts the rules (PROMTOOL names it; make helm-test builds one).
//
// It is a module of its own, so that eosink's module does not depend on Kubernetes' packages.
// The tests need a helm binary: HELM names it (make helm-test builds one into ~/.cache/eosink).
package charttest
