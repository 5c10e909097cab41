{{/*
The alert rules' groups, from the values of prometheusRule (the argument). prometheusrule.yaml
renders them as the PrometheusRule's spec.groups; deploy/prometheus/eosink-rules.yaml is the
same groups with the chart's defaults (deploy/helm/test checks that they are equal).
Every expression aggregates without instance and pod, so a partition that moves to another
replica stays one alert.
*/}}
{{- define "eosink.ruleGroups" -}}
- name: eosink
  rules:
    - alert: EosinkConsumerLagHigh
      expr: max without (instance, pod) (eosink_partition_lag) > {{ .lag.offsets }}
      for: {{ .lag.for }}
      labels:
        severity: warning
      annotations:
        summary: '{{`eosink {{ $labels.pipeline }}: {{ $labels.topic }}[{{ $labels.partition }}] is {{ $value }} offsets behind`}}'
        description: '{{`The lag of the partition (the high watermark last seen minus the stored next offset) has stayed above `}}{{ .lag.offsets }}{{` offsets. The sink is slower than its producers, or the partition is paused or stopped. eosink lag shows the exact lag; docs/operations.md, section Positions and lag.`}}'
    - alert: EosinkPartitionStopped
      expr: max without (instance, pod) (eosink_partition_stopped) > 0
      for: {{ .stoppedPartition.for }}
      labels:
        severity: critical
      annotations:
        summary: '{{`eosink {{ $labels.pipeline }}: {{ $labels.topic }}[{{ $labels.partition }}] stopped ({{ $labels.reason }})`}}'
        description: '{{`The partition makes no progress until the cause is fixed. eosink status shows the error and the remedy; docs/operations.md, section Stopped partitions.`}}'
    - alert: EosinkDeadLetters
      expr: sum without (instance, pod) (rate(eosink_dead_letters_total[{{ .rateWindow }}])) > {{ .deadLetters.perSecond }}
      for: {{ .deadLetters.for }}
      labels:
        severity: warning
      annotations:
        summary: '{{`eosink {{ $labels.pipeline }}: records are being dead-lettered ({{ $value }}/s)`}}'
        description: '{{`Poison records are written to the dead-letter table. eosink dlq list shows them; fix the cause, then eosink dlq replay. docs/operations.md, section Dead letters.`}}'
    - alert: EosinkDeadLetterBreakerTripped
      expr: max without (instance, pod) (eosink_partition_stopped{reason="too_many_dead_letters"}) > 0
      for: {{ .breaker.for }}
      labels:
        severity: critical
      annotations:
        summary: '{{`eosink {{ $labels.pipeline }}: the dead-letter breaker stopped {{ $labels.topic }}[{{ $labels.partition }}]`}}'
        description: '{{`More than dead_letter.max_ratio of the last dead_letter.window records would have been dead-lettered: usually a schema change or an upstream bug. Fix the cause and restart; docs/operations.md, section Dead letters.`}}'
    - alert: EosinkCommitLatencyHigh
      expr: histogram_quantile(0.99, sum without (instance, pod) (rate(eosink_commit_seconds_bucket[{{ .rateWindow }}]))) > {{ .commitLatency.p99Seconds }}
      for: {{ .commitLatency.for }}
      labels:
        severity: warning
      annotations:
        summary: '{{`eosink {{ $labels.pipeline }}: commit latency p99 is {{ $value | humanizeDuration }}`}}'
        description: '{{`The 99th percentile of BEGIN to the end of COMMIT of a batch has stayed above `}}{{ .commitLatency.p99Seconds }}{{` s: PostgreSQL is slow or contended (locks, I/O, a long-running transaction). eosink_batch_retries_by_cause_total shows retries.`}}'
{{- end -}}
