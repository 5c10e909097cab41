{{/* The release's name for its objects, at most 63 characters. */}}
{{- define "eosink.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "eosink.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "eosink.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eosink.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "eosink.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "eosink.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "eosink.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The pipeline config: .Values.config with what the chart owns (http, timeouts.shutdown and,
with static membership, group.instance.id). Fails on values that contradict each other.
*/}}
{{- define "eosink.config" -}}
{{- if not (kindIs "string" .Values.config) -}}
{{- fail "config must be the pipeline config file's text (config: |), not a mapping" -}}
{{- end -}}
{{- if not (has .Values.membership (list "dynamic" "static")) -}}
{{- fail (printf "membership must be dynamic or static, not %q" (toString .Values.membership)) -}}
{{- end -}}
{{- $c := fromYaml .Values.config -}}
{{- if hasKey $c "Error" -}}
{{- fail (printf "config is not a YAML mapping: %s" (toString $c.Error)) -}}
{{- end -}}
{{- if not (hasKey $c "http") -}}
{{- $_ := set $c "http" (printf ":%d" (int .Values.http.port)) -}}
{{- else -}}
{{- $listen := "" -}}
{{- if kindIs "string" $c.http -}}
{{- $listen = $c.http -}}
{{- else if kindIs "map" $c.http -}}
{{- $listen = toString (default "" $c.http.listen) -}}
{{- end -}}
{{- $port := regexFind "[0-9]+$" $listen -}}
{{- if and (not (contains "${" $listen)) (ne $port (toString (int .Values.http.port))) -}}
{{- fail (printf "config's http listens on %q, but http.port is %d (the probes' and the Service's port): make them equal" $listen (int .Values.http.port)) -}}
{{- end -}}
{{- end -}}
{{- $t := dict -}}
{{- if hasKey $c "timeouts" -}}
{{- if not (kindIs "map" $c.timeouts) -}}
{{- fail "config.timeouts must be a mapping" -}}
{{- end -}}
{{- $t = $c.timeouts -}}
{{- end -}}
{{- if hasKey $t "shutdown" -}}
{{- fail "config.timeouts.shutdown is set by the chart from shutdownTimeoutSeconds (terminationGracePeriodSeconds must exceed it): set shutdownTimeoutSeconds instead" -}}
{{- end -}}
{{- $_ := set $t "shutdown" (printf "%ds" (int .Values.shutdownTimeoutSeconds)) -}}
{{- $_ := set $c "timeouts" $t -}}
{{- $k := default (dict) $c.kafka -}}
{{- $p := default (dict) $k.properties -}}
{{- if hasKey $p "group.instance.id" -}}
{{- fail "config.kafka.properties.group.instance.id is set by the chart: choose membership: static (each pod's name) instead" -}}
{{- end -}}
{{- if eq .Values.membership "static" -}}
{{- $_ := set $p "group.instance.id" "${POD_NAME}" -}}
{{- $_ := set $k "properties" $p -}}
{{- $_ := set $c "kafka" $k -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{- define "eosink.terminationGracePeriodSeconds" -}}
{{- $drain := int .Values.shutdownTimeoutSeconds -}}
{{- if lt $drain 1 -}}
{{- fail "shutdownTimeoutSeconds must be at least 1" -}}
{{- end -}}
{{- $grace := int .Values.terminationGracePeriodSeconds -}}
{{- if eq $grace 0 -}}
{{- $grace = add $drain 30 -}}
{{- else if le $grace $drain -}}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be above shutdownTimeoutSeconds (%d), or the kubelet kills eosink mid-drain" $grace $drain) -}}
{{- end -}}
{{- $grace -}}
{{- end -}}

{{/* Environment of eosink's containers: the pod's name and namespace, then $env. */}}
{{- define "eosink.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- with .env }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Volumes: the config, a writable /tmp, the secret mounts and extra volumes. */}}
{{- define "eosink.volumes" -}}
- name: config
  configMap:
    name: {{ .configMap }}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- range .secretMounts }}
- name: {{ required "secretMounts[].name is required" .name }}
  secret:
    secretName: {{ required "secretMounts[].secretName is required" .secretName }}
    defaultMode: 0440
    {{- with .items }}
    items:
      {{- toYaml . | nindent 6 }}
    {{- end }}
{{- end }}
{{- with .extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "eosink.volumeMounts" -}}
- name: config
  mountPath: /etc/eosink
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- range .secretMounts }}
- name: {{ .name }}
  mountPath: {{ required "secretMounts[].mountPath is required" .mountPath }}
  readOnly: true
{{- end }}
{{- with .extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The scheme of the probes and the ServiceMonitor: HTTPS when config's http has tls. */}}
{{- define "eosink.scheme" -}}
{{- $c := fromYaml .Values.config -}}
{{- if and (kindIs "map" $c.http) $c.http.tls -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}
