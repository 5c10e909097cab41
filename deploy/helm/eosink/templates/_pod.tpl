{{/* The pod template of the Deployment and the StatefulSet. */}}
{{- define "eosink.podTemplate" -}}
metadata:
  labels:
    {{- include "eosink.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # A changed pipeline.yaml rolls the pods.
    checksum/config: {{ include "eosink.config" . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- with .Values.serviceAccountName }}
  serviceAccountName: {{ . }}
  {{- end }}
  # eosink talks to Kafka and PostgreSQL, never to the Kubernetes API.
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: {{ include "eosink.terminationGracePeriodSeconds" . }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: eosink
      image: {{ include "eosink.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: [run, -config, /etc/eosink/pipeline.yaml]
      ports:
        - name: http
          containerPort: {{ .Values.http.port }}
          protocol: TCP
      env:
        {{- include "eosink.env" (dict "env" .Values.env) | nindent 8 }}
      {{- with .Values.envFrom }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      livenessProbe:
        httpGet:
          path: /healthz
          port: http
          scheme: {{ include "eosink.scheme" . }}
        {{- toYaml .Values.livenessProbe | nindent 8 }}
      readinessProbe:
        httpGet:
          path: /readyz
          port: http
          scheme: {{ include "eosink.scheme" . }}
        {{- toYaml .Values.readinessProbe | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        {{- include "eosink.volumeMounts" .Values | nindent 8 }}
  volumes:
    {{- include "eosink.volumes" (merge (dict "configMap" (include "eosink.fullname" .)) .Values) | nindent 4 }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
